"""Who a connection is and what it may do: principals, TLS, SASL, authorization and quotas
(docs/security.md). Pure parts here; the broker wires them into connections and handlers."""
