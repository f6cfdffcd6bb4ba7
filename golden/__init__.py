"""The golden corpus (data, not code): read by conformance.corpus, written by `qconform golden regen`."""
