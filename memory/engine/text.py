"""Heuristic text analysis for memory leaves (the "silks" used when no LLM is configured).

Everything here is deterministic and dependency-free so that ingestion gives the same
graph on every machine and in every test run:

* ``parse_datetime`` - session timestamps (ISO 8601 and conversational forms).
* ``extract_entities`` / ``key_terms`` / ``canonical_entity`` - the *relations* silk.
* ``emotion`` - the *emotion* silk (valence, intensity) from a small lexicon.
* ``resolve_times`` / ``date_terms`` / ``session_date_terms`` - the *temporal* silk:
  relative expressions are anchored to the session time and rendered back into the
  words a later question or answer would use, so plain BM25 can match them.
"""

from __future__ import annotations

import bisect
import calendar
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

__all__ = [
    "Emotion",
    "TimeMention",
    "canonical_entity",
    "aliases",
    "date_terms",
    "emotion",
    "extract_entities",
    "has_time_expression",
    "asks_only",
    "key_terms",
    "parse_datetime",
    "resolve_times",
    "session_date_terms",
    "STOPWORDS",
]

# ---------------------------------------------------------------------------
# Calendar vocabulary
# ---------------------------------------------------------------------------

MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

_MONTHS: dict[str, int] = {name.lower(): i + 1 for i, name in enumerate(MONTH_NAMES)}
_MONTHS.update({name.lower()[:3]: i + 1 for i, name in enumerate(MONTH_NAMES)})
_MONTHS["sept"] = 9

_WEEKDAYS: dict[str, int] = {name.lower(): i for i, name in enumerate(WEEKDAY_NAMES)}
_WEEKDAY_ABBR: dict[str, int] = {
    "mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3,
    "fri": 4, "sat": 5, "sun": 6,
}  # fmt: skip

_NUMBER_WORDS: dict[str, int] = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "couple": 2, "a couple": 2, "a couple of": 2, "couple of": 2,
}  # fmt: skip
# Vague quantities: resolved to ~3 units but reported one granularity coarser.
_VAGUE_NUMBERS = {"few", "a few", "several"}

_SEASONS: dict[str, int] = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}

# ---------------------------------------------------------------------------
# Word lists
# ---------------------------------------------------------------------------

STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against ago all almost also although always am among an and another any
    anybody anyone anything anyway anyways are aren't around as at away back be became because become
    been before being below beside besides between both but by can can't cannot could couldn't did
    didn't do does doesn't doing don't done down during each either else enough even ever every
    everybody everyone everything few for from further get gets getting give given gives go goes going
    gone got gotten had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers
    herself him himself his how how's however i i'd i'll i'm i've if in into is isn't it it'd it'll
    it's its itself just keep kept know known knows least less let let's lot lots made make makes
    making many may maybe me might mine more most much must my myself near need needs neither never
    no nobody none nor not nothing now of off often oh ok okay on once one only onto or other others
    otherwise our ours ourselves out over own per perhaps quite rather really said same say says see
    seem seemed seems seen shall she she'd she'll she's should shouldn't since so some somebody
    someone something sometimes somewhat soon still such sure take taken takes than that that's the
    their theirs them themselves then there there's these they they'd they'll they're they've thing
    things think this those though through thus to together too took toward towards under until up
    upon us use used uses using very via was wasn't way we we'd we'll we're we've well went were
    weren't what what's whatever when whenever where where's whereas wherever whether which while who
    who's whoever whole whom whose why will with within without won't would wouldn't yes yet you
    you'd you'll you're you've your yours yourself yourselves
    yeah yep yup hey hi hello wow omg lol haha hahaha hmm um uh ah aw aww thanks thank please gonna
    wanna gotta kinda sorta like pretty totally actually definitely probably super tbh btw bye
    stuff kind sort bit right got new good great nice cool awesome glad also come came comes coming
    tell told ask asked feel feels felt look looks looked looking want wants wanted try tried trying
    day days week weeks month months year years time times today yesterday tomorrow tonight
    last next weekend weekends morning evening night ago
    """.split()
)

# Words that are capitalised only because of position or register, never as names.
_NON_ENTITY: frozenset[str] = (
    STOPWORDS
    | frozenset(
        """
    dear congrats congratulations cheers sorry anyway anyways guess sounds sound love loved loving
    awesome amazing absolutely exactly true totally agreed agree nope nah yay woah whoa oops ooh
    ohh bro dude buddy guys mate lmao cute wonderful fantastic incredible beautiful perfect
    interesting honestly hopefully luckily unfortunately fortunately thankfully seriously basically
    good great nice cool glad happy sad excited thrilled definitely certainly really speaking talking
    take keep let check imagine remember wish hope thinking wait enjoy glad sure meanwhile plus
    lastly finally first second third next last also besides though although however
    mr mrs ms dr morning afternoon evening night weekend tonight everybody
    describe explain list summarize summarise recall remind give show find mention
    """.split()
    )
    | frozenset(_MONTHS)
    | frozenset(_WEEKDAYS)
    | frozenset(_WEEKDAY_ABBR)
)

# Everyday words that often open a chat sentence ("Nature is...", "Appreciate it!"). Only
# consulted for sentence-initial words, where capitalisation says nothing about names.
_COMMON_OPENERS: frozenset[str] = frozenset(
    """
    appreciate talk talks chat catch stay believe cherish remind reminds count hang bet guessing
    nature life art music dance yoga pottery books book pets animals people family friends friend kids
    work school home food travel sports games game team fans weather health mind body heart soul
    long little small big best hard tough crazy lucky proud mental mixed highly fully simply
    challenges setbacks moments events memories weddings finals experiences changes change care
    creativity rock fingers anytime bummer ouch oof yum yea mm mmm awww woohoo woo yikes phew huh
    haha hehe hmmm wowza gosh geez damn darn shoot
    sometimes lately recently later earlier sooner tomorrow nowadays
    nothing everything something anything someone everyone nobody
    hope wish mean means guess feel feeling trust trying thank glad sorry enjoy love miss want
    keep made make making doing being having seeing looking going getting taking giving
    remember forget let check look listen watch read write play run walk go come bring
    call text send share show tell ask try start stop finish learn teach grow build help
    support thanks thank cool fun wild sweet neat wonderful lovely cute excellent brilliant
    interesting exciting amazing awesome incredible fantastic beautiful gorgeous stunning
    perfect nice good great bad sad awful terrible horrible scary weird funny strange
    yes no nope sure definitely absolutely totally exactly indeed
    truly mainly impressive tons strong simple positive quality success respect lost understand hold
    push create gather confidence obstacles thoughts ha hah lemme gotcha man
    two three four five six seven eight nine ten
    update updates note notes reminder heads fyi psa correction news announcement warning important tip
    question answer summary recap agenda decision decisions context background edit btw todo followup
    production prod staging deploys deploy deployment deployments release releases rollout migration
    customer customers user users incident incidents outage outages meeting meetings standup sprint
    budget pricing costs cost revenue latency uptime traffic database databases service services
    server servers cluster backups backup tests pipeline builds docs roadmap hiring onboarding
    hotfix hotfixes patch patches fix fixes bug bugs ticket tickets
    """.split()
)

# Days named after a weekday ("Black Friday", "Cyber Monday"): one name, not a weekday to resolve.
_HOLIDAY_QUALIFIERS = ("black", "cyber", "good", "easter", "ash", "holy", "palm", "maundy", "shrove", "giving")
# Checked in the weekday handler, on the few characters before a weekday: lookbehinds in the pattern
# ran at every character of every text (3x the pattern's time). "Good" only capitalised: "a good
# Monday for sales" is a Monday.
_HOLIDAY_BEFORE = re.compile(r"(?:\b(?i:black|cyber|easter|ash|holy|palm|maundy|shrove|giving)|\bGood)\s+$")

# Lower-case words allowed *inside* a multi-word proper noun ("University of Michigan").
_CONTRACTION_RE = re.compile(r"'(?:re|ve|d|ll|m|t)$|n't$")

_NAME_CONNECTORS = frozenset({"of", "the", "de", "da", "del", "la", "le", "von", "van", "du"})

# Acronym-shaped interjections that are not entities.
_SHOUTED_NON_ENTITIES = frozenset({"ok", "omg", "lol", "btw", "tbh", "lmao", "wtf", "idk", "imo", "fyi"})

# Sentence-initial words shaped like verbs/adverbs ("Painting", "Finished", "Usually").
_COMMON_SUFFIXES = ("ing", "ed", "ally", "ently", "antly", "ously", "fully", "ively", "ately", "ily")

# ---------------------------------------------------------------------------
# Result types
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Emotion:
    """Valence in [-1, 1] (negative .. positive) and intensity in [0, 1] (flat .. charged)."""

    valence: float
    intensity: float


@dataclass(frozen=True)
class TimeMention:
    """A time expression resolved to an inclusive date range.

    ``approximate`` marks vague expressions ("a few days ago") whose range was widened
    to the stated granularity rather than computed exactly.
    """

    surface: str
    start: date
    end: date
    granularity: str  # 'day' | 'week' | 'month' | 'year'
    approximate: bool = False
    # A day named without its year ("March 5"): ``start`` is the occurrence nearest the reference,
    # a guess a search need not make (every March 5 it holds is a candidate).
    yearless: bool = False


# ---------------------------------------------------------------------------
# parse_datetime
# ---------------------------------------------------------------------------

_MON_ALT = r"(?:january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)"
_DMY_RE = re.compile(
    rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{_MON_ALT})\.?,?\s+(?P<year>\d{{4}})\b", re.I
)
_MDY_RE = re.compile(
    rf"\b(?P<mon>{_MON_ALT})\.?\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<year>\d{{4}})\b", re.I
)
_CLOCK_RE = re.compile(r"\b(?P<h>\d{1,2})(?::(?P<mi>\d{2}))?\s*(?P<ap>[ap])\.?\s*m\b\.?", re.I)
_CLOCK24_RE = re.compile(r"\b(?P<h>[01]?\d|2[0-3]):(?P<mi>[0-5]\d)\b")


def parse_datetime(s: str | None) -> datetime | None:
    """Parse ISO 8601 or conversational stamps ("1:56 pm on 8 May, 2023", "May 8, 2023").

    Returns a naive datetime for conversational forms (they carry no zone); ISO input
    keeps whatever offset it had. ``None`` when no calendar date can be found.
    """
    if not s:
        return None
    s = s.strip()
    try:
        return datetime.fromisoformat(s)
    except ValueError:
        pass
    m = _DMY_RE.search(s) or _MDY_RE.search(s)
    if not m:
        return None
    try:
        day = date(int(m["year"]), _MONTHS[m["mon"].lower()], int(m["day"]))
    except ValueError:
        return None
    rest = s[: m.start()] + " " + s[m.end() :]
    hour = minute = 0
    clock = _CLOCK_RE.search(rest)
    if clock:
        hour = int(clock["h"]) % 12 + (12 if clock["ap"].lower() == "p" else 0)
        minute = int(clock["mi"] or 0)
    elif clock24 := _CLOCK24_RE.search(rest):
        hour, minute = int(clock24["h"]), int(clock24["mi"])
    if hour > 23 or minute > 59:
        hour = minute = 0
    return datetime(day.year, day.month, day.day, hour, minute)


# ---------------------------------------------------------------------------
# Entities and key terms
# ---------------------------------------------------------------------------

_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")
_WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9'&\-]*")


def _normalise_quotes(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')


def _strip_possessive(tok: str) -> tuple[str, bool]:
    low = tok.lower()
    if low.endswith("'s"):
        return tok[:-2], True
    if tok.endswith("'"):
        return tok[:-1], True
    return tok, False


def _is_capitalised(tok: str) -> bool:
    return tok[0].isupper()


def _is_acronym(tok: str) -> bool:
    letters = [c for c in tok if c.isalpha()]
    return len(letters) >= 2 and all(c.isupper() for c in letters)


# Ordinary words that also open multi-word names ("New York", "Great Barrier Reef"); they
# count only when directly followed by another capitalised name word.
_NAME_OPENERS = frozenset({"new", "great", "good", "big", "little", "old", "saint", "san", "los", "las"})


def _starts_name(toks: list[tuple[str, str]], i: int, acceptable: Callable[[str, bool], bool]) -> bool:
    tok = toks[i][0]
    if not _is_capitalised(tok) or tok.lower() not in _NAME_OPENERS or i + 1 >= len(toks):
        return False
    nxt, gap = toks[i + 1]
    return gap.strip() == "" and acceptable(nxt, False)


def extract_entities(text: str) -> list[str]:
    """Capitalised names and multi-word proper nouns, in order of first appearance.

    Heuristics: runs of adjacent capitalised words form one entity ("New York"), with
    lower-case connectors allowed inside ("Bank of America"); punctuation or a
    possessive ends a run. Greetings, pronouns, month and weekday names never count
    (dates belong to the temporal silk). A capitalised sentence-initial word is kept
    only if it is not a common word: not in the word lists, not shaped like a verb or
    adverb, and not written in lower case elsewhere in the same text. Acronyms
    ("LGBTQ") are kept anywhere. Deduplicated case-insensitively.
    """
    text = _normalise_quotes(text)
    lowercase_seen = {w for w in _WORD_RE.findall(text) if w.islower()}
    midsentence_caps: set[str] = set()
    sentences = [s for s in _SENTENCE_SPLIT_RE.split(text) if s and s.strip()]
    tokenised: list[list[tuple[str, str]]] = []  # (token, gap before token)
    for sent in sentences:
        toks: list[tuple[str, str]] = []
        prev_end = 0
        for m in _WORD_RE.finditer(sent):
            toks.append((m.group(), sent[prev_end : m.start()]))
            prev_end = m.end()
        tokenised.append(toks)
        for i, (tok, _gap) in enumerate(toks):
            if i > 0 and _is_capitalised(tok):
                midsentence_caps.add(_strip_possessive(tok)[0].lower())

    def acceptable(tok: str, initial: bool) -> bool:
        base, _ = _strip_possessive(tok)
        if not base or not base[0].isalpha() or not _is_capitalised(base):
            return False
        low = base.lower()
        if _is_acronym(base):
            return low not in _SHOUTED_NON_ENTITIES and low not in STOPWORDS and low != "i"
        if low in _NON_ENTITY or len(low) < 2 or _CONTRACTION_RE.search(low):
            return False
        if initial and low not in midsentence_caps:
            if (
                low in lowercase_seen
                or low in _COMMON_OPENERS
                or (len(low) > 5 and low.endswith(_COMMON_SUFFIXES))
            ):
                return False
        return True

    out: list[str] = []
    seen: set[str] = set()

    def emit(parts: list[str]) -> None:
        while parts and parts[-1].lower() in _NAME_CONNECTORS:
            parts.pop()
        if not parts:
            return
        name = " ".join(parts)
        key = name.lower()
        if key not in seen:
            seen.add(key)
            out.append(name)

    for toks in tokenised:
        run: list[str] = []
        pending: list[str] = []  # connectors waiting for a following capitalised word
        for i, (tok, gap) in enumerate(toks):
            initial = i == 0
            clean_gap = gap.strip() == ""
            if run and not clean_gap:
                emit(run)
                run, pending = [], []
            base, possessive = _strip_possessive(tok)
            if (run and clean_gap and not pending and run[-1].lower() in _HOLIDAY_QUALIFIERS
                    and base.lower() in _WEEKDAYS):
                run.append(base)  # "Black Friday": the weekday ends the holiday's name
                emit(run)
                run = []
            elif (tok.lower() in _HOLIDAY_QUALIFIERS and _is_capitalised(tok) and i + 1 < len(toks)
                  and toks[i + 1][1].strip() == "" and toks[i + 1][0].lower() in _WEEKDAYS and not run):
                run, pending = [base], []  # "Good Friday" opening a sentence: "Good" alone is no name
            elif acceptable(tok, initial) or _starts_name(toks, i, acceptable):
                # A sentence-initial word joined to a following name is more likely a name itself.
                run.extend(pending)
                pending = []
                run.append(base)
                if possessive:
                    emit(run)
                    run = []
            elif run and tok.lower() in _NAME_CONNECTORS and len(pending) < 2:
                pending.append(tok.lower())
            else:
                if run:
                    emit(run)
                run, pending = [], []
        if run:
            emit(run)
    return out


def canonical_entity(name: str, known_names: Iterable[str]) -> str:
    """Map a nickname to a known full name by case-insensitive prefix ("Mel" -> "Melanie").

    Only resolves when exactly one known name matches, so ambiguous short forms stay
    as they were rather than being merged into the wrong person.
    """
    known = list(dict.fromkeys(known_names))
    low = name.lower()
    for k in known:
        if k.lower() == low:
            return k
    if len(low) < 3:
        return name
    matches = [k for k in known if k.lower().startswith(low) or k.lower().split(" ")[0] == low]
    if len(matches) == 1:
        return matches[0]
    return name


def aliases(names: Iterable[str], known_names: Iterable[str]) -> list[str]:
    """Canonicalise a list of entity names against ``known_names``, deduplicated in order."""
    known = list(known_names)
    return list(dict.fromkeys(canonical_entity(n, known) for n in names))


def _content_words(text: str) -> list[str]:
    return [w.lower() for w in _WORD_RE.findall(_normalise_quotes(text))]


def key_terms(text: str, n: int = 8, *, entities: list[str] | None = None) -> list[str]:
    """Up to ``n`` salient lower-case content words, most frequent first, ties by position.

    Stop words, numbers, very short words and tokens belonging to extracted entities are
    excluded: entities are indexed separately, so repeating them here would double-count.
    ``entities``: ``extract_entities(text)`` when the caller has it already (it is half the cost).
    """
    if entities is None:
        entities = extract_entities(text)
    entity_tokens = {t.lower() for e in entities for t in e.split()}
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for pos, raw in enumerate(_content_words(text)):
        word = _strip_possessive(raw)[0].strip("-'")
        if (
            len(word) < 3
            or not word[0].isalpha()
            or word in STOPWORDS
            or word in entity_tokens
            or word in _MONTHS
            or word in _WEEKDAYS
            or "'" in word
        ):
            continue
        counts[word] = counts.get(word, 0) + 1
        first.setdefault(word, pos)
    ranked = sorted(counts, key=lambda w: (-counts[w], first[w]))
    return ranked[: max(n, 0)]


# ---------------------------------------------------------------------------
# Emotion
# ---------------------------------------------------------------------------

_LEXICON: dict[str, float] = {
    # positive
    "happy": 0.8, "happier": 0.8, "happiest": 0.9, "happiness": 0.8, "glad": 0.6, "joy": 0.8,
    "joyful": 0.8, "love": 0.8, "loved": 0.8, "loving": 0.7, "lovely": 0.7, "great": 0.6,
    "good": 0.5, "awesome": 0.8, "amazing": 0.8, "wonderful": 0.8, "fantastic": 0.8,
    "excellent": 0.8, "excited": 0.8, "exciting": 0.7, "thrilled": 0.9, "delighted": 0.8,
    "proud": 0.7, "grateful": 0.7, "thankful": 0.7, "thanks": 0.4, "thank": 0.4, "blessed": 0.7,
    "inspiring": 0.7, "inspired": 0.7, "inspiration": 0.6, "fun": 0.6, "enjoy": 0.6,
    "enjoyed": 0.6, "enjoying": 0.6, "beautiful": 0.7, "nice": 0.5, "cool": 0.5, "peaceful": 0.6,
    "calm": 0.4, "relaxed": 0.5, "relaxing": 0.5, "hopeful": 0.6, "hope": 0.4, "optimistic": 0.6,
    "confident": 0.6, "brave": 0.5, "courage": 0.5, "supportive": 0.6, "helpful": 0.5,
    "kind": 0.4, "caring": 0.5, "cheerful": 0.7, "content": 0.3, "satisfied": 0.5,
    "accomplished": 0.7, "success": 0.6, "successful": 0.6, "win": 0.6, "won": 0.6,
    "achievement": 0.6, "celebrate": 0.7, "celebrated": 0.6, "celebrating": 0.7, "cute": 0.5,
    "adorable": 0.6, "incredible": 0.7, "perfect": 0.7, "brilliant": 0.7, "impressive": 0.6,
    "interesting": 0.4, "fascinating": 0.6, "passionate": 0.6, "passion": 0.5, "freedom": 0.5,
    "comfort": 0.4, "comforting": 0.5, "healing": 0.4, "accepted": 0.6, "acceptance": 0.5,
    "welcome": 0.5, "motivated": 0.6, "motivating": 0.6, "rewarding": 0.7, "fulfilling": 0.7,
    "meaningful": 0.6, "special": 0.5, "favorite": 0.5, "favourite": 0.5, "laugh": 0.6,
    "smile": 0.6, "smiling": 0.6, "yay": 0.7, "congrats": 0.7, "congratulations": 0.7,
    "wow": 0.4, "positive": 0.5, "powerful": 0.5, "best": 0.7, "better": 0.4, "glorious": 0.8,
    "stoked": 0.8, "ecstatic": 0.9, "pleased": 0.6, "relieved": 0.5, "fortunate": 0.6,
    "lucky": 0.6, "awesomeness": 0.8, "blast": 0.6, "thrilling": 0.8, "uplifting": 0.7,
    # negative
    "sad": -0.7, "sadness": -0.7, "unhappy": -0.7, "upset": -0.6, "angry": -0.7, "mad": -0.6,
    "furious": -0.9, "annoyed": -0.5, "annoying": -0.5, "frustrated": -0.6, "frustrating": -0.6,
    "stressed": -0.6, "stress": -0.5, "stressful": -0.6, "anxious": -0.6, "anxiety": -0.6,
    "worried": -0.6, "worry": -0.5, "scared": -0.6, "afraid": -0.6, "fear": -0.6,
    "terrified": -0.9, "nervous": -0.4, "lonely": -0.7, "alone": -0.3, "hurt": -0.6, "pain": -0.6,
    "painful": -0.7, "sick": -0.5, "ill": -0.5, "tired": -0.4, "exhausted": -0.6, "bored": -0.4,
    "boring": -0.4, "disappointed": -0.6, "disappointing": -0.6, "depressed": -0.8,
    "depression": -0.7, "hate": -0.8, "hated": -0.8, "terrible": -0.8, "awful": -0.8,
    "horrible": -0.8, "bad": -0.6, "worse": -0.6, "worst": -0.8, "difficult": -0.4, "hard": -0.3,
    "tough": -0.4, "struggle": -0.5, "struggling": -0.6, "struggled": -0.5, "lost": -0.4,
    "lose": -0.4, "loss": -0.6, "grief": -0.8, "cry": -0.5, "cried": -0.6, "crying": -0.6,
    "tears": -0.4, "broken": -0.6, "fail": -0.6, "failed": -0.6, "failure": -0.7,
    "rejected": -0.7, "rejection": -0.7, "embarrassed": -0.5, "ashamed": -0.6, "guilty": -0.5,
    "regret": -0.6, "sorry": -0.4, "unfortunately": -0.5, "accident": -0.6, "injured": -0.6,
    "injury": -0.6, "died": -0.8, "death": -0.8, "overwhelmed": -0.5, "overwhelming": -0.4,
    "scary": -0.6, "dangerous": -0.5, "crisis": -0.6, "problem": -0.4, "problems": -0.4,
    "rough": -0.4, "challenging": -0.3, "setback": -0.5, "miss": -0.3, "heartbroken": -0.9,
    "devastated": -0.9, "discrimination": -0.6, "unfair": -0.6, "bullied": -0.7, "abuse": -0.8,
    "miserable": -0.8, "disgusted": -0.7, "jealous": -0.5, "insecure": -0.5, "hopeless": -0.8,
    "burnout": -0.6, "burned": -0.3,
}  # fmt: skip

_EMOJI: dict[str, float] = {
    ":)": 0.5, ":-)": 0.5, ":D": 0.7, ";)": 0.4, "<3": 0.7, ":(": -0.5, ":-(": -0.5, ":'(": -0.6,
    "\u2764": 0.7, "\U0001f60a": 0.6, "\U0001f602": 0.5, "\U0001f389": 0.6, "\U0001f64f": 0.4,
    "\U0001f622": -0.6, "\U0001f62d": -0.6, "\U0001f621": -0.7, "\U0001f614": -0.5,
}  # fmt: skip

_INTENSIFIERS: dict[str, float] = {
    "so": 1.4, "really": 1.4, "very": 1.4, "super": 1.5, "extremely": 1.7, "incredibly": 1.6,
    "totally": 1.4, "absolutely": 1.6, "truly": 1.4, "such": 1.3, "too": 1.2, "quite": 1.2,
    "pretty": 1.2, "especially": 1.3, "deeply": 1.5, "utterly": 1.6, "most": 1.3, "soo": 1.5,
    "sooo": 1.6, "slightly": 0.6, "somewhat": 0.7, "kinda": 0.7, "little": 0.8,
}  # fmt: skip

_NEGATORS = frozenset("not no never none nobody nothing neither nor without hardly barely cannot".split())
_CLAUSE_BREAK_RE = re.compile(r"[,.;:!?()\-\u2014]|\bbut\b", re.I)
_NEGATED_SCALE = -0.6  # "not happy" is negative but weaker than "sad"; "not bad" mildly positive.


def emotion(text: str) -> Emotion:
    """Lexicon valence/intensity with negation, intensifiers, capitals and "!" emphasis.

    A negator within the three preceding words of the same clause flips and damps a
    sentiment word; immediately preceding intensifiers multiply it. Valence is the
    damped sum ``s / sqrt(s^2 + 1)``; intensity saturates with total absolute affect.
    """
    text = _normalise_quotes(text)
    total = 0.0
    magnitude = 0.0
    for clause in _CLAUSE_BREAK_RE.split(text):
        words = re.findall(r"[A-Za-z']+", clause)
        lows = [w.lower() for w in words]
        for i, low in enumerate(lows):
            score = _LEXICON.get(low)
            if score is None:
                continue
            if low in _INTENSIFIERS and i + 1 < len(lows) and lows[i + 1] in _LEXICON:
                continue  # "pretty good": "pretty" is acting as a booster here
            mult = 1.0
            j = i - 1
            while j >= 0 and lows[j] in _INTENSIFIERS and j >= i - 2:
                mult *= _INTENSIFIERS[lows[j]]
                j -= 1
            score *= min(mult, 2.0)
            if words[i].isupper() and len(words[i]) >= 3:
                score *= 1.3
            window = lows[max(0, i - 3) : i]
            if any(w in _NEGATORS or w.endswith("n't") for w in window):
                score *= _NEGATED_SCALE
            total += score
            magnitude += abs(score)
    for emo, score in _EMOJI.items():
        k = text.count(emo)
        if k:
            total += score * k
            magnitude += abs(score) * k
    bangs = min(text.count("!"), 3)
    if total:
        total *= 1.0 + 0.1 * bangs
    valence = total / math.sqrt(total * total + 1.0)
    intensity = 1.0 - math.exp(-0.9 * magnitude) + 0.1 * bangs
    return Emotion(
        valence=round(max(-1.0, min(1.0, valence)), 4),
        intensity=round(max(0.0, min(1.0, intensity)), 4),
    )


# ---------------------------------------------------------------------------
# Time resolution
# ---------------------------------------------------------------------------


class _Unresolvable(Exception):
    """The expression names no representable day: it resolves outside ``date.min``..``date.max``
    (years 1-9999: "10000 years ago", "tomorrow" on 31 December 9999) or to no such day ("30 February
    2023"). ``resolve_times`` skips the expression, as it would an unparseable one: text is never a
    reason for a write to fail."""


# Every date a handler builds goes through these two, so no handler can raise ValueError or
# OverflowError from user text; ``resolve_times`` catches ``_Unresolvable`` in one place.
def _day(year: int, month: int, day: int) -> date:
    try:
        return date(year, month, day)
    except (ValueError, OverflowError) as exc:  # OverflowError: a year beyond a C int
        raise _Unresolvable from exc


def _add_days(d: date, days: int) -> date:
    try:
        return d + timedelta(days=days)
    except OverflowError as exc:  # past date.min/date.max, or |days| beyond timedelta's range
        raise _Unresolvable from exc


def _week_start(d: date) -> date:
    return _add_days(d, -d.weekday())


def _month_range(year: int, month: int) -> tuple[date, date]:
    # The last day from the calendar, not "the 1st of next month minus a day": December 9999 is
    # representable even though January 10000 is not.
    start = _day(year, month, 1)
    return start, _day(year, month, calendar.monthrange(year, month)[1])


def _shift_month(year: int, month: int, delta: int) -> tuple[int, int]:
    idx = year * 12 + (month - 1) + delta
    return idx // 12, idx % 12 + 1


def _season_range(name: str, year: int) -> tuple[date, date]:
    first = _SEASONS[name]
    start = _day(year, first, 1)
    end_y, end_m = _shift_month(year, first, 2)
    return start, _month_range(end_y, end_m)[1]


def _season_occurrences(name: str, years: Iterable[int]) -> list[tuple[date, date]]:
    """The season in each of ``years`` that is representable (winter 9999 ends in year 10000): the
    ones left still answer "last summer" at the edges of the calendar."""
    out: list[tuple[date, date]] = []
    for year in years:
        try:
            out.append(_season_range(name, year))
        except _Unresolvable:
            continue
    return out


# A weekday set for a thing in the present tense is the coming one: "the cutover is scheduled for
# Friday", "the demo is on Thursday", "moved to Monday", "the release ships Friday", written on a
# Wednesday. (Read backwards, as a bare weekday is, the plan was dated to the week before.) Only
# where the words can be nothing else: a copula ("is", "are"; not "was"), a participle or past verb
# with the day as its goal ("scheduled for", "moved to"; "he moved on Monday", "I pushed on Friday"
# are past), a verb in the third person present ("ships", "starts"; not "launch", a noun in "the
# launch on Friday went smoothly"). Earlier days of a list count as the verb's too ("is on Monday
# or Tuesday").
_WD_WORD = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_SET_FOR = re.compile(
    r"(?:(?<!\bwas )(?<!\bwere )\b(?:is|are|be)\s+(?:(?:now|still|currently|again)\s+)?(?:(?:on|for)\s+)?"
    r"|\b(?:scheduled|planned|set|slated|booked|moved|pushed|postponed|rescheduled)\s+(?:back\s+)?(?:for|to|until|till)\s+"
    r"|\bdue\s+(?:on\s+)?"
    r"|\b(?:starts|begins|happens|lands|ships|launches|kicks\s+off)\s+(?:on\s+)?)"
    rf"(?:(?:on\s+)?{_WD_WORD}\s*(?:,\s*|\s+(?:or|and|to)\s+|\s*[-/]\s*))*$", re.I)


# "it's Friday", "the demo is on Friday", said on a Friday: that day
_IS_BEFORE = re.compile(r"(?:\bis|\bit's)\s+$", re.I)


_FUTURE_RE = re.compile(
    r"\b(will|won't|gonna|going to|plan|plans|planning|upcoming|can't wait|looking forward|hope to|"
    r"hoping to|wanna|want to|intend|soon|shall|next|tomorrow|this coming)\b|'ll\b",
    re.I,
)


def _is_future(sentence: str) -> bool:
    return bool(_FUTURE_RE.search(sentence))


@dataclass(frozen=True)
class _Ctx:
    ref: date
    future: bool


_Handler = Callable[[re.Match[str], _Ctx], tuple[date, date, str, bool] | None]

_MONTH_CAP = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
_MONTH_ANY_CAP = rf"(?:{_MONTH_CAP}|(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?)"
_NUM_ALT = r"\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few|several"


def _h_fixed(offset: int) -> _Handler:
    def handler(m: re.Match[str], ctx: _Ctx) -> tuple[date, date, str, bool]:
        d = _add_days(ctx.ref, offset)
        return d, d, "day", False

    return handler


def _h_dmy(m: re.Match[str], ctx: _Ctx) -> tuple[date, date, str, bool]:
    d = _day(int(m["year"]), _MONTHS[m["mon"].lower().rstrip(".")], int(m["day"]))
    return d, d, "day", False


def _h_iso(m: re.Match[str], ctx: _Ctx) -> tuple[date, date, str, bool]:
    d = _day(int(m["y"]), int(m["m"]), int(m["d"]))
    return d, d, "day", False


def _h_dm(m: re.Match[str], ctx: _Ctx) -> tuple[date, date, str, bool] | None:
    # No year given: take the occurrence nearest the reference date (29 February: of the nearest leap
    # year, which may be four years off).
    month, day = _MONTHS[m["mon"].lower().rstrip(".")], int(m["day"])
    best: date | None = None
    for year in range(ctx.ref.year - 4, ctx.ref.year + 5):
        try:
            cand = _day(year, month, day)
        except _Unresolvable:  # no 29 February that year, or a year outside 1-9999
            continue
        if best is None or abs((cand - ctx.ref).days) < abs((best - ctx.ref).days):
            best = cand
    if best is None:
        return None
    return best, best, "day", False


def _h_month_year(m: re.Match[str], ctx: _Ctx) -> tuple[date, date, str, bool]:
    start, end = _month_range(int(m["year"]), _MONTHS[m["mon"].lower().rstrip(".")])
    return start, end, "month", False


def _h_year(m: re.Match[str], ctx: _Ctx) -> tuple[date, date, str, bool]:
    y = int(m["year"])
    return _day(y, 1, 1), _day(y, 12, 31), "year", False


def _direction(word: str, ctx: _Ctx) -> int:
    """-1 past, 0 current, +1 future for a modifier word (falls back to sentence tense)."""
    word = " ".join(word.lower().split())
    if word in {"last", "past", "previous", "the previous", "the past", "since", "before"}:
        return -1
    if word in {"next", "coming", "the following", "the next", "this coming", "after", "until", "till", "by"}:
        return 1
    if word == "this":
        return 0
    return 1 if ctx.future else -1


def _h_relative_period(m: re.Match[str], ctx: _Ctx) -> tuple[date, date, str, bool]:
    mod = m["mod"] or m["mod2"]
    unit = (m["unit"] or m["unit2"]).lower()
    step = _direction(mod, ctx)
    ref = ctx.ref
    if unit == "week":
        ws = _add_days(_week_start(ref), 7 * step)
        return ws, _add_days(ws, 6), "week", False
    if unit == "weekend":
        ws = _week_start(ref)
        if step < 0:
            sat = _add_days(ws, -2)
        elif step == 0:
            sat = _add_days(ws, 5)
        else:
            sat = _add_days(ws, 12 if ref.weekday() >= 5 else 5)
        return sat, _add_days(sat, 1), "week", False
    if unit == "month":
        y, mo = _shift_month(ref.year, ref.month, step)
        start, end = _month_range(y, mo)
        return start, end, "month", False
    y = ref.year + step
    return _day(y, 1, 1), _day(y, 12, 31), "year", False


def _h_weekday(m: re.Match[str], ctx: _Ctx) -> tuple[date, date, str, bool] | None:
    if not m["mod"] and _HOLIDAY_BEFORE.search(m.string, max(m.start("wd") - 10, 0), m.start("wd")):
        return None  # "Black Friday", "Cyber Monday": a day's name, not that weekday
    name = m["wd"].lower()
    target = _WEEKDAYS.get(name, _WEEKDAY_ABBR.get(name, 0))
    mod = (m["mod"] or "").lower()
    ref = ctx.ref
    if mod == "this":
        d = _add_days(_week_start(ref), target)
    else:
        # (searched up to the match with its own start and end, so a word cut by the window's start
        # cannot read as "is")
        window = (m.string, max(m.start() - 40, 0), m.start())
        if mod in ("", "on") and target == ref.weekday() and _IS_BEFORE.search(*window):
            return ref, ref, "day", False  # "it's Friday", said on a Friday: today
        future = ctx.future or (mod in ("", "on") and _SET_FOR.search(*window))
        step = _direction(mod, ctx) if mod not in ("", "on") else (1 if future else -1)
        if step >= 0:
            d = _add_days(ref, (target - ref.weekday()) % 7 or 7)
        else:
            d = _add_days(ref, -((ref.weekday() - target) % 7 or 7))
    return d, d, "day", False


def _h_named_month(m: re.Match[str], ctx: _Ctx) -> tuple[date, date, str, bool]:
    month = _MONTHS[m["mon"].lower()]
    mod = (m["mod"] or "").lower()
    ref = ctx.ref
    if mod == "last":
        year = ref.year if month < ref.month else ref.year - 1
    elif mod == "next":
        year = ref.year if month > ref.month else ref.year + 1
    elif mod == "this":
        year = ref.year
    elif _direction(mod, ctx) > 0 or (mod in ("in", "during") and _SET_FOR.search(m.string, max(m.start() - 40, 0), m.start())):
        # ("the offsite is in March", written in December, is next March, as a weekday set so is)
        year = ref.year if month >= ref.month else ref.year + 1
    else:
        year = ref.year if month <= ref.month else ref.year - 1
    start, end = _month_range(year, month)
    return start, end, "month", False


def _h_season(m: re.Match[str], ctx: _Ctx) -> tuple[date, date, str, bool] | None:
    name = m["season"].lower()
    ref = ctx.ref
    if m["year"]:
        start, end = _season_range(name, int(m["year"]))
        return start, end, "month", False
    occurrences = _season_occurrences(name, range(ref.year - 2, ref.year + 2))
    mod = (m["mod"] or "").lower()
    step = _direction(mod, ctx) if mod else (1 if ctx.future else -1)
    if mod == "this":
        containing = [o for o in occurrences if o[0] <= ref <= o[1]]
        start, end = containing[0] if containing else _season_range(name, ref.year)
        return start, end, "month", False
    if step > 0:
        strict = mod in {"next", "the following", "the next"}
        found = [o for o in occurrences if (o[0] > ref if strict else o[1] >= ref)][:1]
    else:
        strict = mod in {"last", "past", "previous", "the previous", "the past"}
        found = [o for o in occurrences if (o[1] < ref if strict else o[0] <= ref)][-1:]
    if not found:  # the wanted occurrence is before year 1 or after year 9999
        return None
    start, end = found[0]
    return start, end, "month", False


def _h_ago(m: re.Match[str], ctx: _Ctx) -> tuple[date, date, str, bool]:
    raw = " ".join(m["n"].lower().split())
    unit = m["unit"].lower()
    approx = raw in _VAGUE_NUMBERS
    # Ten digits or more is past year 9999 in any unit (and int() refuses over 4,300 digits).
    if raw.isdigit() and len(raw.lstrip("0")) > 9:
        raise _Unresolvable
    n = 3 if approx else int(raw) if raw.isdigit() else _NUMBER_WORDS.get(raw, 1)
    ref = ctx.ref
    if unit == "day":
        d = _add_days(ref, -n)
        if not approx:
            return d, d, "day", False
        ws = _week_start(d)
        return ws, _add_days(ws, 6), "week", True
    if unit == "week":
        d = _add_days(ref, -7 * n)
        if not approx:
            ws = _week_start(d)
            return ws, _add_days(ws, 6), "week", False
        start, end = _month_range(d.year, d.month)
        return start, end, "month", True
    if unit == "month":
        y, mo = _shift_month(ref.year, ref.month, -n)
        if not approx:
            start, end = _month_range(y, mo)
            return start, end, "month", False
        return _day(y, 1, 1), _day(y, 12, 31), "year", True
    y = ref.year - n
    return _day(y, 1, 1), _day(y, 12, 31), "year", approx


_REL_MOD = (
    r"last|this|next|past|previous|coming|the\s+previous|the\s+past|the\s+following|the\s+next|this\s+coming"
)
_WD_FULL = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_WD_ABBR = r"mon|tues?|wed|thu(?:rs?)?|fri|sat|sun"

# Order does not matter: overlapping matches are resolved longest-first.
_PATTERNS: list[tuple[re.Pattern[str], _Handler]] = [
    (re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b"), _h_iso),
    (_DMY_RE, _h_dmy),
    (_MDY_RE, _h_dmy),
    (
        re.compile(
            rf"\b(?:the\s+)?(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{_MONTH_ANY_CAP})(?![A-Za-z])"
        ),
        _h_dm,
    ),
    (re.compile(rf"\b(?P<mon>{_MONTH_ANY_CAP})\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\b(?!,?\s*\d)"), _h_dm),
    (re.compile(rf"\b(?:in\s+)?(?P<mon>{_MONTH_ANY_CAP}),?\s+(?P<year>(?:19|20)\d{{2}})\b"), _h_month_year),
    (
        re.compile(
            r"\b(?:in|since|during|from|by|until|till|around|before|after|back\s+in|of|early|late|mid)"
            r"[\s-]+(?:the\s+year\s+)?(?P<year>(?:19|20)\d{2})\b(?![-/]\d)",
            re.I,
        ),
        _h_year,
    ),
    (re.compile(r"\b(?:the\s+)?day\s+before\s+yesterday\b", re.I), _h_fixed(-2)),
    (re.compile(r"\b(?:the\s+)?day\s+after\s+tomorrow\b", re.I), _h_fixed(2)),
    (re.compile(r"\byesterday\b|\blast\s+night\b", re.I), _h_fixed(-1)),
    (re.compile(r"\btoday\b|\btonight\b|\bthis\s+(?:morning|afternoon|evening)\b", re.I), _h_fixed(0)),
    (re.compile(r"\btomorrow\b", re.I), _h_fixed(1)),
    (
        re.compile(
            rf"\b(?:(?P<mod>{_REL_MOD})\s+(?P<unit>week|weekend|month|year)\b"
            rf"|the\s+(?P<unit2>week|weekend|month|year)\s+(?P<mod2>before|after)\b)",
            re.I,
        ),
        _h_relative_period,
    ),
    (re.compile(rf"\b(?:(?P<mod>last|this|next|past|coming|on)\s+)?(?P<wd>{_WD_FULL})\b", re.I), _h_weekday),
    (re.compile(rf"\b(?P<mod>last|this|next)\s+(?P<wd>{_WD_ABBR})\b", re.I), _h_weekday),
    (
        re.compile(
            rf"\b(?P<mod>last|this|next|in|during|since|until|till|by|around|through|throughout|from)"
            # (not a month followed by its day: "until December 10" is the 10th, not December)
            rf"\s+(?:(?:early|late|mid)[\s-]+)?(?P<mon>{_MONTH_CAP})\b(?!\s+\d{{1,2}}(?:st|nd|rd|th)?\b)"
        ),
        _h_named_month,
    ),
    (
        re.compile(
            rf"\b(?:(?P<mod>{_REL_MOD}|in|during|since|over)\s+(?:the\s+)?)?(?P<season>spring|summer|fall|autumn|winter)"
            r"(?:\s+(?:of\s+)?(?P<year>(?:19|20)\d{2}))?\b",
            re.I,
        ),
        _h_season,
    ),
    (re.compile(rf"\b(?P<n>{_NUM_ALT})\s+(?P<unit>day|week|month|year)s?\s+ago\b", re.I), _h_ago),
]


def _season_filter(m: re.Match[str]) -> bool:
    # A bare "fall"/"spring" is usually a verb or a water source; require a modifier or year.
    return bool(m.groupdict().get("season") is None or m["mod"] or m["year"])


def _scan(text: str) -> list[tuple[int, int, re.Match[str], _Handler]]:
    found: list[tuple[int, int, re.Match[str], _Handler]] = []
    for pattern, handler in _PATTERNS:
        for m in pattern.finditer(text):
            if not _season_filter(m):
                continue
            found.append((m.start(), m.end(), m, handler))
    # Longest match wins ("7 May 2023" over "May 2023" over "in May"); then leftmost.
    found.sort(key=lambda t: (-(t[1] - t[0]), t[0]))
    # Characters already taken, not a list of spans compared with each match: that was quadratic in
    # the mentions ("Monday " 2,850 times in one turn took 30 s of a write request).
    taken = bytearray(len(text))
    chosen: list[tuple[int, int, re.Match[str], _Handler]] = []
    for item in found:
        s, e = item[0], item[1]
        if any(taken[s:e]):
            continue
        taken[s:e] = b"\x01" * (e - s)
        chosen.append(item)
    chosen.sort(key=lambda t: t[0])
    return chosen


# Every pattern above needs a digit or one of these words; a text with neither cannot match, so
# ``has_time_expression`` and ``resolve_times`` skip the ~20 pattern scans for it (most turns:
# 0.15 ms -> 3 us each; 2,455 of LoCoMo's 2,760 turns have no trigger).
_TIME_TRIGGER = re.compile(
    r"\d|\b(?:yesterday|today|tonight|tomorrow|night|morning|afternoon|evening|week|weekend|month|year|ago"
    rf"|spring|summer|fall|autumn|winter|{_WD_FULL}|{_WD_ABBR}|{_MON_ALT[3:-1]})\b",
    re.I,
)


def has_time_expression(text: str) -> bool:
    """True when ``text`` contains an expression ``resolve_times`` would try to resolve (one past years
    1-9999 still counts: the text does speak of a time)."""
    text = _normalise_quotes(text)
    return _TIME_TRIGGER.search(text) is not None and bool(_scan(text))


def asks_only(text: str) -> bool:
    """True when every sentence of ``text`` is a question ("What Postgres version does production
    run?", "How was the trip? Did you rest?"): it states nothing a question about the same words could
    be answered by."""
    parts = [text[a:b].strip() for a, b in _sentence_bounds(text)]
    parts = [p for p in parts if p.strip(" \t\n.!…-–—")]
    return bool(parts) and all(p.rstrip().endswith("?") for p in parts)


def _sentence_bounds(text: str) -> list[tuple[int, int]]:
    bounds: list[tuple[int, int]] = []
    start = 0
    for m in re.finditer(r"[.!?]+(?:\s+|$)|\n+", text):
        bounds.append((start, m.end()))
        start = m.end()
    if start < len(text):
        bounds.append((start, len(text)))
    return bounds


_WEEKDAY_THEN_DATE = re.compile(r"[\s,]*(?:the\s+)?")


# A text's first mentions only: a memory that names hundreds of days is a list, not a statement of
# when something happened, and each kept mention is stored (time_refs) and rendered as search text.
MAX_TIME_MENTIONS = 64


def resolve_times(text: str, ref: datetime | date) -> list[TimeMention]:
    """Resolve time expressions in ``text`` against the session time ``ref``.

    Weeks run Monday-Sunday; weekends are reported as 'week' granularity spanning two
    days. Bare weekdays, "in <Month>" and seasons look backwards unless their sentence
    has a future cue ("will", "next", "going to", ...), because memories mostly report
    what already happened. Explicit day-month dates without a year take the occurrence
    nearest ``ref``. Mentions are returned in text order without overlaps. An expression that
    resolves outside years 1-9999 ("10000 years ago", "tomorrow" on 31 December 9999) is left out,
    like one naming no real day: this never raises for any text and any ``ref``.
    """
    text = _normalise_quotes(text)
    if _TIME_TRIGGER.search(text) is None:  # ~90% of conversational turns: skip the pattern scans
        return []
    ref_day = ref.date() if isinstance(ref, datetime) else ref
    sentences = _sentence_bounds(text)
    # Each sentence read once for its future cue, each mention's sentence found by bisection: per
    # mention, the sentence was searched for and read again, mentions x length on a long turn.
    starts = [a for a, _b in sentences]
    future = [_is_future(text[a:b]) for a, b in sentences]
    out: list[TimeMention] = []
    weekday_end = -1  # where the last mention kept ended, when it was a weekday
    for s, _e, m, handler in _scan(text):
        if len(out) >= MAX_TIME_MENTIONS:
            break
        if handler in (_h_dm, _h_dmy, _h_iso) and weekday_end >= 0 and _WEEKDAY_THEN_DATE.fullmatch(text, weekday_end, s):
            # "Monday November 16", "Monday, 16 November": the weekday names the date's day, not
            # the Monday before the session (it was resolved to 9 November beside the 16th)
            out.pop()
        weekday_end = -1
        i = bisect.bisect_right(starts, s) - 1
        is_future = future[i] if 0 <= i < len(future) and s < sentences[i][1] else _is_future(text)
        try:
            resolved = handler(m, _Ctx(ref=ref_day, future=is_future))
        except _Unresolvable:  # outside years 1-9999 or no such day: left unresolved, never an error
            continue
        if resolved is None:
            continue
        start, end, gran, approx = resolved
        weekday_end = m.end() if handler is _h_weekday else -1
        out.append(
            TimeMention(surface=m.group().strip(), start=start, end=end, granularity=gran, approximate=approx,
                        yearless=handler is _h_dm)
        )
    return out


# ---------------------------------------------------------------------------
# Rendering dates as searchable text
# ---------------------------------------------------------------------------


def _fmt_day(d: date) -> str:
    return f"{d.day} {MONTH_NAMES[d.month - 1]} {d.year}"


def _fmt_month(d: date) -> str:
    return f"{MONTH_NAMES[d.month - 1]} {d.year}"


def _months_between(start: date, end: date) -> list[str]:
    out: list[str] = []
    y, mo = start.year, start.month
    while (y, mo) <= (end.year, end.month) and len(out) < 12:
        out.append(f"{MONTH_NAMES[mo - 1]} {y}")
        y, mo = _shift_month(y, mo, 1)
    return out


def _mention_phrases(t: TimeMention) -> list[str]:
    if t.granularity == "day":
        return [_fmt_day(t.start), _fmt_month(t.start), str(t.start.year)]
    if t.granularity == "week":
        label = "weekend of" if (t.end - t.start).days <= 2 else "week of"
        return [f"{label} {_fmt_day(t.start)}", *_months_between(t.start, t.end)]
    if t.granularity == "month":
        months = _months_between(t.start, t.end)
        if len(months) == 3 and t.start.month in {3, 6, 9, 12}:
            season = {3: "spring", 6: "summer", 9: "fall", 12: "winter"}[t.start.month]
            return [f"{season} {t.start.year}", *months]
        return months
    years = [str(y) for y in range(t.start.year, t.end.year + 1)]
    return years[:3]


def date_terms(mentions: Sequence[TimeMention]) -> str:
    """Render resolved mentions as short lexical text for a node's search document.

    Uses the forms people write in questions and answers ("7 May 2023", "May 2023",
    "2023", "week of 1 May 2023"), deduplicated across mentions.
    """
    phrases: list[str] = []
    for t in mentions:
        phrases.extend(_mention_phrases(t))
    return " ".join(dict.fromkeys(phrases))


def session_date_terms(dt: datetime | date) -> str:
    """Searchable rendering of a session timestamp: "8 May 2023 May 2023 2023 Monday"."""
    d = dt.date() if isinstance(dt, datetime) else dt
    return f"{_fmt_day(d)} {_fmt_month(d)} {d.year} {WEEKDAY_NAMES[d.weekday()]}"
