//go:build tools

// Package tools names the Kueue mains build.sh builds, so go.mod and go.sum pin them.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
