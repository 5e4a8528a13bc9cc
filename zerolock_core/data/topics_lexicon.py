"""Word lists for the synthetic news-headline task (see ``topics.py``).

Class lexicons are indexed like the labels: 0 World, 1 Sports, 2 Business,
3 Sci/Tech.  Actors are singular so that they agree with the present-tense
headline verbs ("Arsenal clinches title").  The ``SHARED_*`` lists are used by
every class on purpose, so that no single frequent word gives the class away.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(kw_only=True, frozen=True)
class ClassLexicon:
    actors: tuple[str, ...]
    verbs: tuple[str, ...]
    objects: tuple[str, ...]
    places: tuple[str, ...]


# Named subsets, used on their own by the ambiguous (mixed-class) scenarios.
STATES = ("Iran", "North Korea", "Israel", "Pakistan", "Sudan", "the EU")
CLUBS = ("Arsenal", "Chelsea", "Real Madrid", "Juventus", "AC Milan", "Bayern Munich", "Boston", "New York")
CORPORATIONS = ("Wal-Mart", "General Motors", "Exxon", "Citigroup", "Boeing", "Airbus", "Morgan Stanley", "Ford")
TECH_COMPANIES = (
    "Microsoft", "Google", "Apple", "IBM", "Intel", "Sun Microsystems", "Oracle", "Yahoo", "Sony", "Nokia",
)

WORLD = ClassLexicon(
    actors=(
        "the prime minister", "the president", "the UN", "NATO", "the rebel leader",
        "the foreign ministry", "the army", "the military junta", "parliament",
        "the ruling party", "the opposition", "the Security Council", "the interim government",
        "the peace envoy", "the Kremlin", "the White House",
    ) + STATES,
    verbs=(
        "condemns", "rejects", "signs", "calls for", "warns of", "defends", "demands",
        "postpones", "approves", "suspends", "backs", "vows to end", "denies",
        "mediates", "blames", "orders",
    ),
    objects=(
        "ceasefire", "peace accord", "election results", "border clash", "hostage crisis",
        "sanctions", "nuclear programme", "troop withdrawal", "referendum", "car bombing",
        "humanitarian aid", "new constitution", "coup attempt", "asylum rules",
        "embassy attack", "military offensive", "curfew", "refugee camps", "peace plan",
        "prisoner swap", "airstrikes", "militia attacks",
    ),
    places=(
        "Baghdad", "Gaza", "Kabul", "Darfur", "Kashmir", "Beirut", "Caracas", "Kiev",
        "Tehran", "Pyongyang", "Nairobi", "Islamabad", "Haiti", "Fallujah", "Chechnya",
        "the West Bank",
    ),
)

SPORTS = ClassLexicon(
    actors=(
        "Federer", "Agassi", "Woods", "Armstrong", "Beckham",
        "Ronaldo", "the quarterback", "the striker", "the goalkeeper", "the coach",
        "the Olympic champion", "the captain", "the pitcher", "the Ryder Cup team",
    ) + CLUBS,
    verbs=(
        "clinches", "wins", "loses", "reaches", "eyes", "chases", "secures", "celebrates",
        "defends", "misses", "sets up", "books", "seals", "squanders", "survives",
    ),
    objects=(
        "playoff berth", "league title", "semifinal", "championship", "Grand Slam final",
        "pennant", "gold medal", "league lead", "home opener", "World Series",
        "Champions League tie", "relegation battle", "knockout stage", "hat-trick",
        "winning streak", "penalty shootout", "quarterfinal", "opening round",
        "grand prix", "derby", "wild card", "Super Bowl",
    ),
    places=(
        "Old Trafford", "Wimbledon", "Augusta", "Fenway Park", "Anfield", "Yankee Stadium",
        "Flushing Meadows", "the Bernabeu", "Daytona", "Roland Garros", "Monza",
        "Lambeau Field", "Hampden Park", "the San Siro", "Pebble Beach", "Oakland",
    ),
)

BUSINESS = ClassLexicon(
    actors=(
        "the Federal Reserve", "the central bank", "OPEC",
        "Merrill Lynch", "Kmart", "Sears", "the airline", "the SEC", "the Treasury",
        "the retailer", "the automaker", "the insurer", "Fannie Mae", "Goldman Sachs",
    ) + CORPORATIONS,
    verbs=(
        "raises", "cuts", "posts", "reports", "forecasts", "acquires", "slashes", "boosts",
        "files for", "sells", "buys", "trims", "lifts", "freezes", "restates", "hikes",
    ),
    objects=(
        "quarterly profit", "interest rates", "oil prices", "earnings outlook", "dividend",
        "bankruptcy protection", "jobs", "sales forecast", "stock buyback", "bond yields",
        "inflation target", "takeover bid", "merger", "revenue", "pension plan", "layoffs",
        "mortgage rates", "crude futures", "retail sales", "profit warning",
        "fuel surcharge", "cost cuts",
    ),
    places=(
        "Wall Street", "Tokyo", "Frankfurt", "Detroit", "Hong Kong", "Chicago", "Toronto",
        "the Nasdaq", "the Dow", "Zurich", "Houston", "Seattle", "the City",
        "the bond market", "Dallas", "the euro zone",
    ),
)

TECH = ClassLexicon(
    actors=(
        "NASA", "the space agency", "a research team", "Mozilla",
        "AMD", "Dell", "the chipmaker", "the software maker", "Hewlett-Packard",
        "Red Hat", "the Linux project", "the European Space Agency",
    ) + TECH_COMPANIES,
    verbs=(
        "unveils", "launches", "releases", "patches", "develops", "discovers", "tests",
        "ships", "upgrades", "demonstrates", "detects", "designs", "debuts",
        "open-sources", "previews", "recalls",
    ),
    objects=(
        "software", "chip", "web browser", "operating system", "search engine",
        "computer virus", "email worm", "spam filter", "broadband service",
        "wireless network", "satellite", "telescope", "spacecraft", "processor",
        "server line", "music player", "security flaw", "genome map", "robot",
        "Mars rover", "database", "laptop", "mobile phone", "web service",
    ),
    places=(
        "Silicon Valley", "Redmond", "Mars", "the space station", "Cape Canaveral",
        "the web", "Bangalore", "Cupertino", "orbit", "Saturn", "the lab", "Geneva",
        "Pasadena", "Austin", "the Moon", "Helsinki",
    ),
)

LEXICONS: tuple[ClassLexicon, ...] = (WORLD, SPORTS, BUSINESS, TECH)

# Vocabulary every class draws from (AG News headlines share these heavily).
SHARED_ADJECTIVES = (
    "new", "record", "major", "big", "final", "first", "surprise", "key", "fresh",
    "long-awaited", "late", "early", "rare",
)
SHARED_NOUNS = (
    "deal", "talks", "plan", "report", "record", "bid", "move", "decision", "deadline",
    "future", "week", "shares", "row", "review", "vote",
)
SHARED_VERBS_PLURAL = ("stall", "continue", "resume", "drag on", "collapse", "go ahead", "falter")
SHARED_VERBS_SINGULAR = ("stalls", "hesitates", "wavers", "regroups", "looks on", "weighs options")
SHARED_CLAUSES = (
    "talks stall", "talks resume", "shares slide", "shares rally", "the deal collapses",
    "the plan goes ahead", "the deadline passes", "the review continues", "the vote nears",
    "the row deepens", "the report looms", "officials meet", "a new bid emerges",
    "the record stands",
)
SHARED_PAIR_VERBS = ("hold talks on", "strike deal on", "clash over", "agree plan on", "split over")
TIMES = (
    "on Monday", "on Tuesday", "on Wednesday", "on Thursday", "on Friday", "on Saturday",
    "on Sunday", "this week", "last week", "next week", "for the first time", "this year",
    "again", "overnight",
)
ATTRIBUTIONS = (
    "officials said", "analysts said", "a report said", "sources said",
    "according to a report", "people familiar with the plan said", "officials say",
    "a spokesman said",
)
SOURCES = ("Reuters", "AP", "AFP", "Canadian Press", "NEW YORK", "LONDON", "WASHINGTON")
YEARS = tuple(str(y) for y in range(1989, 2005))
