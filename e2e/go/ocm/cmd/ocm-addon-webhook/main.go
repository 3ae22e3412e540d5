// Command ocm-addon-webhook serves OCM v1.2.0's addon conversion webhooks (ManagedClusterAddOn and
// ClusterManagementAddOn, v1alpha1 <-> v1beta1) on loopback only.
//
// The hub's addon CRDs name a conversion webhook, so the hub apiserver cannot serve those kinds without
// one. OCM's own `addon webhook-server` binds every interface and fixed probe and metrics ports (":8000",
// ":8080"); the e2e rig binds 127.0.0.1 only, so this main runs the same OCM webhook types under a
// controller-runtime manager whose every listener is given.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	addonv1alpha1 "open-cluster-management.io/ocm/pkg/addon/webhook/v1alpha1"
	addonv1beta1 "open-cluster-management.io/ocm/pkg/addon/webhook/v1beta1"
)

type initializer interface {
	Init(mgr ctrl.Manager) error
}

func main() {
	// a FlagSet of its own: controller-runtime registers --kubeconfig on the global one
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the hub apiserver (required)")
	host := fs.String("host", "127.0.0.1", "address the webhook server binds")
	port := fs.Int("port", 0, "port the webhook server binds (required)")
	certDir := fs.String("certdir", "", "directory holding tls.crt and tls.key (required)")
	probe := fs.String("health-probe-bind-address", "0", "healthz/readyz address, \"0\" for none")
	_ = fs.Parse(os.Args[1:])
	if *kubeconfig == "" || *port == 0 || *certDir == "" {
		fmt.Fprintln(os.Stderr, "ocm-addon-webhook: --kubeconfig, --port and --certdir are required")
		os.Exit(2)
	}
	if err := run(*kubeconfig, *host, *port, *certDir, *probe); err != nil {
		fmt.Fprintf(os.Stderr, "ocm-addon-webhook: %v\n", err)
		os.Exit(1)
	}
}

func run(kubeconfig, host string, port int, certDir, probe string) error {
	ctrl.SetLogger(klog.Background())
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, addonv1alpha1.Install, addonv1beta1.Install,
	} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: probe,
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    host,
			Port:    port,
			CertDir: certDir,
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.MinVersion = tls.VersionTLS12 }},
		}),
	})
	if err != nil {
		return err
	}
	// v1alpha1 is the conversion hub, as in OCM's pkg/addon/webhook.SetupWebhookServer.
	for _, w := range []initializer{
		&addonv1alpha1.ManagedClusterAddOnWebhook{}, &addonv1beta1.ManagedClusterAddOnWebhook{},
		&addonv1alpha1.ClusterManagementAddOnWebhook{}, &addonv1beta1.ClusterManagementAddOnWebhook{},
	} {
		if err := w.Init(mgr); err != nil {
			return err
		}
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
