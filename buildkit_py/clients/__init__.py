"""What the tool talks to below the registries and Google's APIs: HTTP/1.1 on the standard library (transport) and the
Docker engine (engine). oci/ and google/ stand on the same floor and use transport."""
