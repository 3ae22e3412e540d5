// Command pause is the e2e node's sandbox ("pause") container: it sleeps until SIGINT or SIGTERM and
// reaps orphaned children meanwhile, as Kubernetes' build/pause/linux/pause.c does. It is written in Go
// so the rig builds it with the same toolchain as everything else (static, CGO_ENABLED=0), and nothing
// has to be pulled.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
