from accelscore.cli import grpc_environment

grpc_environment()  # grpc's settings as the product runs them, before any test module imports grpc

pytest_plugins = ["tests.kubeapi.fixtures"]
