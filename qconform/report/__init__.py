"""Report writers (JSON, HTML, Markdown): written on the controller only."""
