"""Google Cloud as the tool talks to it: Application Default Credentials (adc), what the clients of Google's REST APIs
share (rest), and packages staged where jobs read them (storage)."""
