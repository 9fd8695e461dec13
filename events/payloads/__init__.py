"""The `data` of each event type, as TypedDicts, each followed by its type's one declaration (events/registry.py):
payloads stay plain dicts on the wire (and in old logs), so a type checker checks the keys where they are built
and read while nothing changes at run time.

A field is `NotRequired` where some producer leaves it out (see the catalogue for who emits what);
`total=False` where the producers differ enough that every field is optional. A reader of a log
written by an older or newer version must still use `.get` for optional fields: these types say
what the producers of this version write, not what every log holds.

One module per area, imported here in the order docs/events.md lists them; `payloads.RunLaunchedData`
names any of their classes.
"""

# ruff: noqa: I001  (the order of these imports is the order of docs/events.md)
from trainwarden.events.payloads.runs import *  # noqa: F403
from trainwarden.events.payloads.observed import *  # noqa: F403
from trainwarden.events.payloads.decided import *  # noqa: F403
from trainwarden.events.payloads.people import *  # noqa: F403
from trainwarden.events.payloads.remote import *  # noqa: F403
