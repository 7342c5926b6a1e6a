"""deepactors: a deep agent harness on an async actor runtime."""
