"""Thin HTTP handlers, one module per area; the work lives in the services below them."""
