"""The bundled runners: one thin adapter per runtime, no comparison logic in any of them."""
