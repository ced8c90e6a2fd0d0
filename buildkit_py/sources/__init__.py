"""Readers of what a trainer directory holds, each reading one kind of text as the tool that runs it would (the shell
for commands). They know nothing of the config: inference turns what they read into config values."""
