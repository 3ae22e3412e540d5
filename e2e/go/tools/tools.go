//go:build tools

// Package tools names the helper-tool mains build.sh builds, so go.mod and go.sum pin them.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
