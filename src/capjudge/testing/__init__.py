"""Test support shipped with the library: the OpenAI-protocol stand-in server."""
