pytest_plugins = ["tests.kubeapi.fixtures"]
