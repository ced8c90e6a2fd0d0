"""Job specs and runners: the local run (Vertex AI's environment on this machine)."""
