"""The core: strict intake, ids, tools, schemas, listings, the pipeline and the gateway, the
refusals and the audit record. No I/O but the tool itself; imports `strictcall.errors` only."""
