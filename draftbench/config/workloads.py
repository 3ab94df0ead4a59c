"""Built-in workloads where speculative methods differ: text only (``prompts`` makes prompts of it).

Each category exercises what one kind of method is for:

* ``code-edit``: a code file in the prompt, asked back with a small change — the answer repeats
  the input, which n-gram methods (``ngram-simple``, ``ngram-map-k``) draft for free;
* ``rewrite``: copy-edit a long passage — again mostly a copy, in prose;
* ``summarise-long``: a long document condensed — little to copy, the draft model's case;
* ``reasoning``: a step-by-step answer that restates its own intermediate results (``ngram-mod``);
* ``session``: one conversation over three requests whose later turns repeat earlier content,
  run in order on one server, so methods that learn across requests (``ngram-mod``,
  ``ngram-cache``) see the earlier turns. Carried state is the point here: its gain is reported
  as "within a session", apart from the fresh-prompt figure (``analysis/session.py``).

A leaf module: plain strings and ``{"role", "content"}`` dicts, no draftbench imports.
"""

from __future__ import annotations

_INVENTORY_PY = '''\
"""Stock levels for a small warehouse."""

from dataclasses import dataclass


@dataclass
class Item:
    sku: str
    name: str
    quantity: int
    unit_price: float


def parse_rows(lines):
    items = []
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        sku, name, quantity, unit_price = line.split(",")
        items.append(Item(sku.strip(), name.strip(), int(quantity), float(unit_price)))
    return items


def stock_value(items):
    total = 0.0
    for item in items:
        total += item.quantity * item.unit_price
    return total


def low_stock(items, threshold=5):
    return [item for item in items if item.quantity < threshold]


def report(items):
    lines = []
    for item in sorted(items, key=lambda i: i.sku):
        lines.append(f"{item.sku:8} {item.name:20} {item.quantity:5d} {item.unit_price:8.2f}")
    lines.append(f"total stock value: {stock_value(items):.2f}")
    return "\\n".join(lines)
'''

_MEMO = (
    "Dear colleages,\n\n"
    "As many of you allready know, the office on Harbour Road will close for renovation from the first of "
    "March untill the end of May. During this period all staff who normaly work there will move to the "
    "second floor of the Station Street building, where desks has been reserved for each team. The "
    "facilities team have prepared a seating plan, wich will be sent out next week together with a map of "
    "the new floor.\n\n"
    "Please make sure that you take home or pack any personal belongings before Friday the twenty-eight of "
    "February, because the cleaning company will empty all cupboards on that day. Boxes can be collected "
    "from the reception desk from Monday onwards; label every box clearly with you're name and team so "
    "that it arrive at the right desk.\n\n"
    "The meeting rooms in Station Street can be booked through the usual calender system, but their will "
    "be fewer of them, so we ask everyone to book only what they realy need and to release rooms they no "
    "longer use. Parking will be limited too: the twelve spaces behind the building is reserved for "
    "visitors and for colleagues with a disability permit.\n\n"
    "We understand that the move will cause some inconvenience and we are greatful for your patience. If "
    "you have any question, please contact the facilities team, who will be happy to help.\n\n"
    "Kind regards,\nThe management team"
)

_REPORT_SECTIONS = (
    ("Background", "The regional water authority supplies drinking water to about 1.2 million people from "
     "three treatment plants. Demand has grown by roughly one percent a year for the past decade, driven by "
     "new housing in the eastern districts, while two of the plants are more than forty years old. In the "
     "summer of last year a heat wave pushed daily demand to 410 million litres, within four percent of "
     "the network's maximum capacity, and a pressure drop left several hundred households without water "
     "for most of an afternoon."),
    ("Options considered", "The board examined three options. The first is to refurbish the two older "
     "plants, raising their capacity by fifteen percent at an estimated cost of 180 million euros over six "
     "years. The second is a new plant on the eastern river, adding 120 million litres a day for about "
     "260 million euros, with the first water expected after seven years because of the permits required. "
     "The third combines a smaller refurbishment with a programme to reduce leaks, which currently waste "
     "an estimated eighteen percent of treated water, and with incentives for households to install "
     "water-saving appliances."),
    ("Findings", "Engineering studies found that the leak reduction programme would recover between 40 and "
     "60 million litres a day within four years at a cost of 70 million euros, making it the cheapest source "
     "of additional capacity per litre. The refurbishment of the older plants is needed in any case to "
     "meet new water quality rules that come into force in six years. The new plant would provide the most "
     "capacity but carries the highest risk of delays and cost overruns, and its energy use would raise "
     "operating costs by about nine percent."),
    ("Public consultation", "More than 3,000 residents responded to the consultation. A clear majority "
     "supported reducing leaks before building new infrastructure, while businesses in the industrial "
     "zone asked for guarantees of supply during dry summers. Environmental groups opposed the new plant "
     "because of its effect on fish migration in the eastern river, and the farmers' association asked "
     "that any new abstraction be limited during the irrigation season."),
    ("Recommendation", "The board recommends the combined option: refurbish both older plants to meet the "
     "new quality rules, start the leak reduction programme immediately, and fund the appliance incentive "
     "for three years. It further recommends reserving the land on the eastern river and completing the "
     "environmental studies, so that a new plant can be built quickly if demand grows faster than expected. "
     "The combined programme would cost about 250 million euros over six years and would be financed by a "
     "tariff increase of three percent a year for four years."),
)
_REPORT = "\n\n".join(f"{title}\n\n{text}" for title, text in _REPORT_SECTIONS)

_SETTINGS_JSON = (
    '{\n  "service": "orders-api",\n  "port": 8080,\n  "workers": 4,\n  "database": {\n    "host": "db.internal",\n'
    '    "port": 5432,\n    "name": "orders",\n    "pool_size": 10\n  },\n  "cache": {\n    "enabled": true,\n'
    '    "ttl_seconds": 300\n  },\n  "logging": {\n    "level": "info",\n    "format": "json"\n  }\n}'
)

_TURN1_ANSWER = (
    "This configuration runs the orders-api service on port 8080 with 4 worker processes. It connects to "
    "the PostgreSQL database \"orders\" on db.internal:5432 with a pool of 10 connections, caches results "
    "for 300 seconds, and writes JSON logs at level info."
)

_TURN2_ANSWER = (
    '{\n  "service": "orders-api",\n  "port": 8080,\n  "workers": 8,\n  "database": {\n    "host": "db.internal",\n'
    '    "port": 5432,\n    "name": "orders",\n    "pool_size": 20\n  },\n  "cache": {\n    "enabled": true,\n'
    '    "ttl_seconds": 300\n  },\n  "logging": {\n    "level": "info",\n    "format": "json"\n  }\n}'
)


def _user(text: str) -> tuple[dict, ...]:
    return ({"role": "user", "content": text},)


_TURN1 = ("Here is the configuration file of one of our services:\n\n" + _SETTINGS_JSON
          + "\n\nExplain briefly what this configuration does.")
_TURN2 = ("Double the number of workers and the database pool size, and give me the complete updated "
          "configuration file.")
_TURN3 = ("Now also change the logging level to debug and the cache ttl to 600 seconds. Show the complete "
          "configuration file again, then list every setting that differs from the original file.")

# Requests that build on the earlier requests of a conversation on the same server: their speed-up
# is "within a session", never the figure for a user's next, fresh prompt.
SESSION_CATEGORY = "session"
RENAMED_CATEGORIES = {"multi-turn": SESSION_CATEGORY}   # old name -> new name, for a clear config error

# (id, category, messages), in the order they run.
METHOD_WORKLOADS: tuple[tuple[str, str, tuple[dict, ...]], ...] = (
    ("code-edit-rename", "code-edit", _user(
        "Here is a Python module:\n\n```python\n" + _INVENTORY_PY + "```\n\nRename the function parse_rows "
        "to read_inventory everywhere and add a one-line docstring to it. Return the complete modified "
        "module in one code block, with nothing else changed.")),
    ("rewrite-memo", "rewrite", _user(
        "Copy-edit the following memo: correct the spelling and grammar mistakes, keep the wording, structure "
        "and tone otherwise unchanged, and return the full corrected text only.\n\n" + _MEMO)),
    ("summarise-long-report", "summarise-long", _user(
        "Summarise the following report for a busy reader in five bullet points, followed by a one-paragraph "
        "conclusion.\n\n" + _REPORT)),
    ("reasoning-trains", "reasoning", _user(
        "A train leaves city A at 08:15 travelling at 90 km/h towards city B, 330 km away. A second train "
        "leaves city B at 09:00 travelling towards city A at 120 km/h. At what time do they meet, and how far "
        "from city A? Think step by step: write down each quantity you compute, check the result by "
        "computing the distance each train has covered, and state the final answer at the end.")),
    ("session-1", SESSION_CATEGORY, _user(_TURN1)),
    ("session-2", SESSION_CATEGORY, (
        {"role": "user", "content": _TURN1}, {"role": "assistant", "content": _TURN1_ANSWER},
        {"role": "user", "content": _TURN2})),
    ("session-3", SESSION_CATEGORY, (
        {"role": "user", "content": _TURN1}, {"role": "assistant", "content": _TURN1_ANSWER},
        {"role": "user", "content": _TURN2}, {"role": "assistant", "content": _TURN2_ANSWER},
        {"role": "user", "content": _TURN3})),
)

METHOD_CATEGORIES = tuple(dict.fromkeys(category for _, category, _ in METHOD_WORKLOADS))
