"""The operators' RPC endpoints: hosts and services, aggregates and server groups."""
