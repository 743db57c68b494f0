"""The embedded llama.cpp server (the `xllamacpp` wheel) started in a child process on loopback."""

from bench.server._embedded import MODES, EmbeddedServer, ServerConfig, ServerError, default_model_path

__all__ = ["MODES", "EmbeddedServer", "ServerConfig", "ServerError", "default_model_path"]
