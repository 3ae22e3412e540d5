//go:build tools

// Package tools names the OCM hub and klusterlet mains build.sh builds, so go.mod and go.sum pin them.
package tools

import (
	_ "open-cluster-management.io/ocm/cmd/addon"
	_ "open-cluster-management.io/ocm/cmd/placement"
	_ "open-cluster-management.io/ocm/cmd/registration"
	_ "open-cluster-management.io/ocm/cmd/work"
)
