"""The bot's slash commands, one object each (base.py), registered once in bot/commands.py.

A command is its own module: how its text is parsed, who may run it, what it does, and how it is
described (in /tw help, a usage error, the manifest). Its user-facing text stays in bot/replies.py.
"""
