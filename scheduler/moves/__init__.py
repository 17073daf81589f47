"""Moving instances that exist: the RPC endpoint of resize, migration and evacuation, and the
periodic task that confirms resizes and ends moves that never finish."""
