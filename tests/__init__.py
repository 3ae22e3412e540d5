"""The test suite. Importing it first sets grpc's process settings as the product runs them (accelscore.cli),
before any test module or conftest imports grpc."""

from accelscore.cli import grpc_environment

grpc_environment()
