"""How the tool shows what it does: progress on a terminal, in CI's plain mode or as JSON (progress), and results and
progress in Jupyter (notebook)."""
