"""The audit: the one writer that batches the gateway's records into the store."""
