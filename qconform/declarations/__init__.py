"""The declarations: each runtime and each operator qconform knows, declared once.

A leaf package: it imports only the types layer (``qconform.dtypes``, ``qconform.case``), so every
other layer may read it. ``operator.py`` says what an operator declaration is made of and
``operators.py`` declares each one; the runtime declarations live beside them.
"""
