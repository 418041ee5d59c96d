"""Rule-based fallbacks used when no LLM is configured: fact abstraction and conflict rules.

Pure functions (no Django), so they are cheap to test and deterministic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from itertools import islice

from memory.engine.text import MONTH_NAMES, resolve_times

# --------------------------------------------------------------------------------------------
# abstraction: one fact per turn that states a first-person event or decision

# A sentence ends at . ! ? followed by a space or the end, so "2.5 kg" does not cut it short ("Alice
# bought 2." was a fact); nor does the dot of a single capital ("U.S.", "J. Smith") or a title.
_END = re.compile(r"[.!?]+(?=\s|$)|\n")
_NO_END = re.compile(r"(?:\b[A-Z]|\b(?:Dr|Mr|Ms|Mrs|Prof|St|Jr|Sr|vs|etc|e\.g|i\.e))\.$")


def _sentences(text: str) -> list[str]:
    out, start = [], 0
    for m in _END.finditer(text):
        if m.group(0) == "." and _NO_END.search(text[start:m.end()]):
            continue
        out.append(text[start:m.end()])
        start = m.end()
    out.append(text[start:])
    return [s.strip() for s in out if s.strip()]


# Spoken questions often come without a "?": "Should I quit my job" is no fact.
_AUX = ("do|does|did|am|is|are|was|were|can|could|should|would|will|shall|may|might|must|have|has|had|"
        "don't|doesn't|didn't|can't|won't|shouldn't")
# ... nor "Is the deploy done", "What's everyone on", "Any update on NYL-520", "Does anyone know".
_QUESTION = re.compile(rf"^(?:(?:{_AUX})\s+(?:i|you|we|he|she|they|it|there|anyone|anybody|someone|somebody|"
                       rf"everyone|everybody|the|this|that|these|those|our|your|my)\b|"
                       rf"(?:what|why|how|when|where|who|which)(?:\s+(?:{_AUX})\b|'s\b|'re\b)|"
                       rf"(?:whats|hows|wheres|whos)\b|any\s+(?:update|updates|news|idea|ideas|thoughts|eta|progress)\b|"
                       rf"(?:anyone|anybody|how\s+about|what\s+about|wondering\s+(?:if|whether))\b)", re.I)
# "Is production still on Postgres 15", "Did Ana merge it": a verb "be"/"do"/"have" opening the
# sentence before its subject. Not before a participle or a state: "Is done", "Was fixed yesterday".
_ASKING_VERB = re.compile(r"^(?:is|are|was|were|does|did|has)\s+(?!(?:[a-z]+(?:ed|ing|en)|done|ready|fine|good|"
                          r"great|ok|okay|live|up|down|back|out|not|also|still|just|already|now|a|an|no)\b)[a-z]",
                          re.I)


def is_question(sentence: str) -> bool:
    """A question asks and asserts nothing: with its "?" or in an interrogative form without one."""
    s = sentence.strip().replace("’", "'")
    return s.rstrip("\"')]").endswith("?") or bool(_QUESTION.match(s)) or bool(_ASKING_VERB.match(s))


def asks_only(text: str) -> bool:
    """Whether every sentence of the text is a question: it states nothing to contradict."""
    return not asserted(text)


def asserted(text: str) -> str:
    """The text without its questions: what it states ("Redis runs 6.2. Should we move to 7.4?"
    states 6.2 only). Empty when the whole text asks."""
    return " ".join(s for s in _sentences(text) if not is_question(s))
_FIRST = re.compile(r"\b(I|I'm|I've|I'll|I'd|we|we're|we've|we'll)\b", re.I)
_DECISION = re.compile(r"\b(decided|decide|agreed|agree|will|plan|planning|going to|booked|bought|chose|"
                       r"switched|moved|started|finished|joined|quit|signed|adopted|visited|went|got|"
                       r"prefer|love|like|hate|eat|live|work|am|was|have|had|need)\b", re.I)
_MODAL = {"will", "would", "can", "could", "should", "must", "might", "may", "shall", "did", "was", "had",
          "used", "never", "always", "also", "just", "really", "still", "often", "usually", "recently",
          "finally", "already", "actually"}
_PAST = {"went", "got", "saw", "made", "took", "bought", "had", "was", "did", "came", "gave", "found",
         "thought", "told", "felt", "left", "met", "ran", "sat", "wrote", "began", "became", "brought", "built",
         "chose", "drove", "ate", "fell", "flew", "forgot", "knew", "lost", "paid", "put", "said", "sent", "sold",
         "spent", "taught", "won", "wore", "heard", "kept", "read", "swam", "sang", "slept", "spoke", "stood",
         "understood", "caught", "fought", "held", "hurt", "let", "set", "cut", "quit", "gotten"}
_IRREGULAR = {"am": "is", "have": "has", "do": "does", "don't": "doesn't", "go": "goes", "was": "was",
              "haven't": "hasn't", "'m": "is", "'ve": "has", "dont": "doesn't", "havent": "hasn't"}
# Adverbs between "I" and its verb: "I really like it" → "Alice really likes it".
_ADVERBS = ("really|also|just|still|often|usually|always|never|sometimes|actually|finally|already|"
            "recently|rarely|mostly|totally|absolutely|definitely|truly|only|even|generally|normally|"
            "seriously|honestly|mainly|kind of|sort of")
# The pronoun "I": not a letter of "A.I.", "I-95" or "iPhone"; not the numeral of "Type I", "World War I".
_I = r"(?<![\w.\-])(?<!\b[Tt]ype )(?<!\b[Ss]tage )(?<!\bPart )(?<!\bPhase )(?<!\bWar )(?<!\bGrade )I(?![\w\-]|\.\w)"
# Quoted speech keeps its own "my" / "I": in 'She said "my car is red"' the car is hers.
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”")
# Interjections and titles: "Oh my God" and "I love My Chemical Romance" are nobody's possessions.
_MY_KEEP = re.compile(r"(?i:\bmy\s+(?:god|gosh|goodness|lord)\b)|(?<=[a-z,] )My\s+[A-Z]")


def _third_person(verb: str) -> str:
    low = verb.lower()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low in _MODAL or low in _PAST or low.endswith("ed") or not low.isalpha():
        return verb
    if re.search(r"(s|sh|ch|x|z|o)$", low):
        return verb + "es"
    if re.search(r"[^aeiou]y$", low):
        return verb[:-1] + "ies"
    return verb + "s"


def rewrite_first_person(sentence: str, speaker: str) -> str:
    """Coreference of I/me/my → the speaker, with the verb after "I" put in the third person."""
    parts: list[str] = []
    last = 0
    for q in _QUOTED.finditer(sentence):  # quoted speech is someone's words, left as written
        parts.append(_rewrite(sentence[last:q.start()], speaker))
        parts.append(q.group(0))
        last = q.end()
    parts.append(_rewrite(sentence[last:], speaker))
    return "".join(parts).strip()


def _rewrite(text: str, speaker: str) -> str:
    s = speaker or "The speaker"
    out = re.sub(rf"{_I}'m\b", f"{s} is", text)
    out = re.sub(rf"{_I}'ve\b", f"{s} has", out)
    out = re.sub(rf"{_I}'ll\b", f"{s} will", out)
    out = re.sub(rf"{_I}'d\b", f"{s} would", out)
    out = re.sub(rf"{_I} ((?:(?:{_ADVERBS}) )?)([A-Za-z]+(?:'t)?)\b",
                 lambda m: f"{s} {m.group(1)}{_third_person(m.group(2))}", out)
    out = re.sub(_I, s, out)
    out = _sub_outside(_MY_KEEP, r"\b[Mm]y\b", f"{s}'s", out)
    out = re.sub(r"\b(me|myself)\b", s, out)
    # "our" is the group's that "we" names: "their" once "we" has named it in the sentence
    has_we = re.search(r"\b[Ww]e\b", out) is not None
    # "we'll" → "... and others will": the "we" of a contraction came out as "and others'll"
    for short, full in (("ll", "will"), ("re", "are"), ("ve", "have"), ("d", "would")):
        out = re.sub(rf"\b[Ww]e'{short}\b", f"{s} and others {full}", out)
    out = re.sub(r"\b[Ww]e\b", f"{s} and others", out)
    out = re.sub(r"\b[Oo]ur\b", "their" if has_we else f"{s}'s group's", out)
    return out


# "I", "me", "my": the speaker is the subject. "We" in team chat is the team, whoever says it.
_FIRST_SINGULAR = re.compile(rf"{_I}|\b(?:me|my|mine|myself)\b", re.I)


def first_person_singular(text: str) -> bool:
    """Whether the text speaks of its speaker ("I", "me", "my"), outside quoted speech."""
    return bool(_FIRST_SINGULAR.search(_QUOTED.sub(" ", text)))


# "We", "our": the speaker's group. Lower-case "us" only: "US" is a country.
_FIRST_PLURAL = re.compile(r"(?i:\b(?:we|our|ours|ourselves)\b)|\bus\b")


def first_person_plural(text: str) -> bool:
    """Whether the text speaks of its speaker's group ("we", "our"), outside quoted speech."""
    return bool(_FIRST_PLURAL.search(_QUOTED.sub(" ", text)))


def _sub_outside(keep: re.Pattern[str], pattern: str, repl: str, text: str) -> str:
    """re.sub of pattern everywhere except inside the spans matched by keep."""
    parts, last = [], 0
    for k in keep.finditer(text):
        parts.append(re.sub(pattern, repl, text[last:k.start()]))
        parts.append(k.group(0))
        last = k.end()
    parts.append(re.sub(pattern, repl, text[last:]))
    return "".join(parts)


_RECURRING = re.compile(r"\b(?:every|each)\s+(?:other\s+)?(?:day|week|month|year|morning|evening|night|weekend|"
                        r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|summer|winter|spring|fall|autumn)\b|\b(?:mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|"
                        r"sundays|weekends|weekly|daily|monthly|yearly)\b", re.I)


def _when(sentence: str, occurred_at: datetime | None) -> str:
    if occurred_at is None:
        return ""
    # A deadline or schedule with no "will"/"next" of its own still looks ahead: resolve it as if
    # the sentence said so (the cue goes before the final stop, inside the same sentence).
    ahead = bool(_AHEAD.search(sentence))
    mentions = resolve_times(sentence.rstrip(".!") + " will" if ahead else sentence, occurred_at)
    # One date for the whole fact only when the sentence names one time: "visited Rome on Monday
    # and will visit Paris on Friday" has two, and either date would be wrong for the other half;
    # a habit ("every Monday", "on Mondays") happens on no single date.
    if len({(t.start, t.end) for t in mentions}) != 1 or _RECURRING.search(sentence):
        return ""
    t = mentions[0]
    if t.granularity == "day":
        return f" (on {t.start.day} {MONTH_NAMES[t.start.month - 1]} {t.start.year})"
    if t.granularity == "week":
        return f" (in the week of {t.start.day} {MONTH_NAMES[t.start.month - 1]} {t.start.year})"
    if t.granularity == "month":
        return f" (in {MONTH_NAMES[t.start.month - 1]} {t.start.year})"
    return f" (in {t.start.year})"


# Work events, whoever they are told of: a team's chat says "Decision: Postgres 16 for billing",
# "Ana now owns the on-call rota", "Deployed v2.4 to staging" without any "I" — the personal
# triggers above (booked, visited, love ...) found 6 facts in 269 turns of it.
_WORK = re.compile(
    r"\b(?:decided|decision\s*:|agreed|agreement\s*:|chose|chosen|switched|migrated|upgraded|downgraded|"
    r"deployed|released|shipped|merged|fixed|resolved|closed|launched|approved|signed\s+off|rolled\s+(?:back|out)|"
    r"cancell?ed|postponed|(?:re)?scheduled|promised|committed|will\s+deliver|delivered|owns|told|assured|"
    r"guaranteed|(?:is|are)\s+(?:now\s+)?(?:responsible|accountable)\s+for|"
    r"(?:is|are)\s+(?:now\s+)?in\s+charge\s+of|assigned\s+to|(?:moved|moving)\b[^.;]{0,200}?\bto)(?!\w)", re.I)
# "Task NYL-520 done", "The billing migration is completed": done, of a piece of work.
_DONE = re.compile(r"\b(?:done|completed?|finished)\b", re.I)
_WORK_ITEM = re.compile(r"#\d|\b[A-Z][A-Z0-9]{1,9}-\d+\b|\b(?:tasks?|tickets?|stor(?:y|ies)|issues?|bugs?|"
                        r"migrations?|prs?|features?|epics?|items?|exports?|rollouts?|upgrades?|reviews?|releases?|"
                        r"deploy(?:ment)?s?|fix(?:es)?|integrations?|setups?|audits?|reports?|specs?|designs?|"
                        r"prototypes?|handovers?|onboarding|sprints?|milestones?)\b", re.I)
# A work verb with its subject left out, as in chat: "Deployed v2.4 to staging" → "<speaker> deployed ...".
_BARE_VERB = re.compile(
    r"^(?:just\s+|finally\s+|also\s+|already\s+)?(?:decided|agreed|chose|switched|migrated|moved|upgraded|"
    r"downgraded|deployed|released|shipped|merged|fixed|resolved|closed|launched|approved|rolled|cancell?ed|"
    r"postponed|(?:re)?scheduled|promised|committed|delivered|completed|finished|finali[sz]ed|booked|bought|"
    r"visited|started|joined|signed|updated|bumped|added|removed|wrote|created|opened|filed|reviewed|tested|"
    r"sent)\b(?!\s*:)", re.I)
# Acknowledgements before what is said: "OK, we'll need more than that" says "we'll need more ...".
_ACK = re.compile(r"^(?:(?:ok(?:ay)?|sure|alright|all\s+right|right|yes|yeah|yep|great|cool|nice|awesome|perfect|"
                  r"noted|got\s+it|thanks|"
                  r"thank\s+you|so|well|btw|fyi|update|quick\s+update|good\s+news|heads\s+up)\s*[,:!.\-–—]+\s*)+",
                  re.I)
# Proposals and requests: "Let's keep the standup short, we have the demo at 3pm" is how a meeting
# starts, not something decided; "please deploy it" is asked, not done.
_PROPOSAL = re.compile(r"^(?:let'?s|let\s+(?:us|me)|please|can\s+you|could\s+you|would\s+you|how\s+about)\b", re.I)
# Courtesies: small talk, unless a work event follows ("Nice work, we shipped 3 days early").
_COURTESY = re.compile(r"^(?:thanks|thank\s+you|sounds|see\s+you|talk\s+(?:to\s+you\s+)?(?:later|soon)|"
                       r"good\s+(?:morning|afternoon|evening)|morning|hi|hello|hey|welcome|congrats|congratulations|"
                       r"nice\s+work|great\s+work|good\s+job|well\s+done|no\s+worries|no\s+problem)\b", re.I)
# Words that carry nothing on their own: a sentence made only of these (and its trigger's
# auxiliaries) is small talk — "I'll take a look", "I have no idea", "Fixed it".
_EMPTY = {
    "i", "me", "my", "mine", "we", "us", "our", "you", "your", "he", "him", "his", "she", "her", "it", "its",
    "they", "them", "their", "this", "that", "these", "those", "there", "here", "everyone", "everybody",
    "someone", "anyone", "all", "guys", "folks", "the", "a", "an", "some", "any", "no", "every", "each",
    "more", "less", "much", "many", "few", "lot", "lots", "bit", "am", "is", "are", "was", "were", "be",
    "been", "being", "do", "does", "did", "done", "have", "has", "had", "will", "would", "can", "could",
    "should", "shall", "may", "might", "must", "and", "or", "but", "so", "to", "of", "in", "on", "at", "for",
    "with", "about", "from", "by", "as", "than", "then", "if", "when", "just", "too", "also", "very", "really",
    "still", "yet", "already", "now", "today", "tomorrow", "tonight", "later", "soon", "again", "back", "up",
    "out", "off", "over", "not", "never", "only", "even", "get", "got", "take", "took", "look", "looking",
    "check", "checking", "think", "thought", "know", "see", "make", "made", "let", "try", "say", "said", "tell",
    "mean", "guess", "hope", "want", "need", "go", "going", "come", "keep", "put", "give", "sure", "ok", "okay",
    "yes", "yeah", "yep", "nope", "thanks", "thank", "great", "good", "nice", "cool", "awesome", "perfect",
    "fine", "right", "sounds", "sound", "idea", "thing", "things", "stuff", "way", "fixed", "agreed", "closed",
    "resolved", "merged", "deployed", "shipped", "decided", "finished", "completed", "complete",
}
# A deadline or a schedule names a time ahead: "promised the fix by Friday" is the coming Friday.
_AHEAD = re.compile(r"\b(?:(?:re)?scheduled|postponed|pushed|moved|moving)\b[^.;]{0,200}?\b(?:to|for|until)\b|\bdue\b|"
                    r"\bdeadline\b|\bpromised\b|\bcommitted\b|\bdeliver\b|"
                    # the present of a plan: "the fix ships on Monday", "the freeze starts Friday"
                    r"\b(?:ships|launches|goes\s+live|kicks\s+off|starts|begins|ends)\b", re.I)


def _says_something(sentence: str) -> bool:
    """A number, a name or one word beyond small talk."""
    if re.search(r"\d", sentence):
        return True
    return any(len(w) >= 3 and "'" not in w and w.lower() not in _EMPTY
               for w in re.findall(r"[A-Za-z][A-Za-z'’-]*", sentence))


def _is_event(sentence: str, unquoted: str) -> bool:
    if _WORK.search(unquoted):
        return True
    if _DONE.search(unquoted) and _WORK_ITEM.search(unquoted):
        return True
    # the personal forms: a first-person event, decision or preference ("I went ...", "we booked ...");
    # the speaker's own "I" (not one in quoted speech) with an event verb anywhere in the sentence,
    # a contracted one included ("we'll ship" is "we will ship")
    return bool(_FIRST.search(unquoted) and _DECISION.search(_expand(sentence)))


def _expand(text: str) -> str:
    # Not "'m"/"'re": "I'm so proud of you" is a reaction, and the personal forms never read them.
    for short, full in (("'ll", " will"), ("'ve", " have"), ("'d", " would")):
        text = re.sub(rf"(?<=\w){short}\b", full, text.replace("’", "'"), flags=re.I)
    return text


_SPEAKER_LABEL = re.compile(r"^\s*(?P<name>[^\W\d][\w .'-]{0,60}?)\s*:\s+")


def heuristic_fact(text: str, speaker: str, occurred_at: datetime | None) -> str | None:
    """The first sentence stating an event, decision, task result or promise — a first-person one,
    or a work event of anyone's — rewritten as a fact (I/my/we → the speaker, a subject-less "Deployed
    v2.4" given the speaker). Questions, proposals and small talk give none. A transcript's label
    naming the speaker ("Bob: I finished ...") is no part of the statement: kept, the fact read
    "Bob: bob finished ..."; its spelling names the speaker in the fact."""
    label = _SPEAKER_LABEL.match(text)
    if label and speaker and label["name"].strip().lower() == speaker.strip().lower():
        text, speaker = text[label.end():], label["name"].strip()
    for sentence in _sentences(text):
        sentence = _ACK.sub("", sentence).strip()
        if len(sentence.split()) < 3 or is_question(sentence) or _PROPOSAL.match(sentence):
            continue
        # Only what the speaker says counts: first person inside quoted speech is someone else.
        unquoted = _QUOTED.sub(" ", sentence)
        if not _is_event(sentence, unquoted) or not _says_something(sentence):
            continue
        if _COURTESY.match(sentence) and not _WORK.search(unquoted):
            continue
        body = sentence.rstrip(".!")
        if _BARE_VERB.match(body):
            body = f"{speaker or 'The speaker'} {body[0].lower()}{body[1:]}"
        fact = rewrite_first_person(body, speaker)
        if speaker and not fact.startswith(speaker):  # "ok, the deploy is done" → "The deploy is done"
            fact = fact[0].upper() + fact[1:]
        return fact + _when(sentence, occurred_at) + "."
    return None


# --------------------------------------------------------------------------------------------
# conflicts: negation flip, or a different number / date / place for the same statement

_NEG = {"not", "no", "never", "don't", "doesn't", "didn't", "isn't", "aren't", "wasn't", "weren't", "won't",
        "can't", "cannot", "haven't", "hasn't", "nothing", "nobody", "neither", "nor",
        # chat spelling without the apostrophe: "I dont eat meat" denies "I eat meat" all the same
        "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "wont", "cant", "havent", "hasnt"}
# "now" and "instead" mark a statement as a change of the other ("The SLA is now 2 hours"): they are no
# word of what it says, and kept they pushed a changed value under the same-statement rule's overlap.
_DROP = {"a", "an", "the", "really", "very", "so", "just", "actually", "also", "anymore", "any", "longer",
         "at", "all", "still", "do", "does", "did", "to", "now", "instead"}
_NUM = re.compile(r"^\d+(?:[.,:]\d+)*(?:am|pm|st|nd|rd|th|k|%)?$")
# Number words as digits: "two kids" and "2 kids" are the same statement, not a different number.
_UNITS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}
_NUM_WORDS = {**_UNITS, "ten": 10, "eleven": 11, "twelve": 12, "twenty": 20, "thirty": 30, "forty": 40,
              "fifty": 50, "hundred": 100}
# Contractions whose stem is not the verb ("can't" → "ca not" would make "ca" differ from "can").
_CONTRACTIONS = ((r"\bcan'?t\b|\bcannot\b", "can not"), (r"\bwon'?t\b", "will not"),
                 (r"\bshan'?t\b", "shall not"), (r"\bain'?t\b", "is not"))
# Forms of one verb: a heuristic fact says "Alice eats" / "Alice doesn't eat" / "Alice has".
_LEMMA = {"is": "be", "am": "be", "are": "be", "has": "have", "does": "do", "goes": "go"}


def _lemma(tok: str) -> str:
    """A crude singular / base form, so "eats" and "eat" (or "cats" and "cat") count as one word."""
    if tok in _LEMMA:
        return _LEMMA[tok]
    if len(tok) > 4 and tok.endswith("ies"):
        return tok[:-3] + "y"
    if len(tok) > 3 and re.search(r"(sh|ch|x|z)es$", tok):
        return tok[:-2]
    if len(tok) > 3 and tok.endswith("s") and not tok.endswith(("ss", "us", "is")):
        return tok[:-1]
    return tok


def _numbers(toks: list[str]) -> set[str]:
    out: set[str] = set()
    i = 0
    while i < len(toks):
        t = toks[i]
        if t in _NUM_WORDS:
            n = _NUM_WORDS[t]
            if n >= 20 and i + 1 < len(toks) and toks[i + 1] in _UNITS:  # "twenty five" is 25
                n += _UNITS[toks[i + 1]]
                i += 1
            out.add(str(n))
        elif _NUM.match(t):
            out.add(t)
        i += 1
    return out


@dataclass(frozen=True)
class Statement:
    negated: bool
    core: frozenset[str]
    numbers: frozenset[str]
    places: frozenset[str]
    # Tokens mixing letters and digits that are not quantities ("v29", "ticket-4512", "pr42"): names
    # of things. Two statements naming different ones are about different things.
    idents: frozenset[str] = frozenset()


# Numbers that name the thing a statement is about rather than say something of it: "CI run 1224
# passed in 26 minutes" and "CI run 1227 passed in 31 minutes" are two runs, not one run with two
# durations; "Ticket #404 resolved" and "#408 resolved" two tickets; "Standup 16 November: ..." and
# "Standup 17 November: ..." two standups. Such a number is taken out of the statement's numbers and
# becomes one of its identifiers (``Statement.idents``); two statements naming different ones are
# about different things. Values stay numbers: "runs Redis 6.2", "is on 3 December", "fixed in
# release 3.2" (after a preposition: the release is what the fix is in, not what is spoken of).
_MONTHS_RE = ("january|february|march|april|may|june|july|august|september|october|november|december|"
              "jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec")
_DATE = (rf"(?:(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m1>{_MONTHS_RE})\.?|"
         rf"(?P<m2>{_MONTHS_RE})\.?\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\b)(?:,?\s+(?P<y>\d{{4}}))?")
_ID_NUM = r"(?:no\.?\s*|number\s+|#\s*)?(?P<n>\d(?:[\d.\-/]*\d)?)"
# Nouns whose number names one of many: runs, tickets, builds, orders, sprints ...
_ID_NOUNS = (r"runs?|tickets?|issues?|bugs?|prs?|mrs?|pull\s+requests?|merge\s+requests?|builds?|jobs?|orders?|"
             "invoices?|incidents?|cases?|sprints?|releases?|stor(?:y|ies)|tasks?|epics?|pipelines?|deploys?|"
             "deployments?|migrations?|requests?|quotes?|contracts?|accounts?|items?|steps?|phases?|rounds?|"
             "batch(?:es)?|iterations?|milestones?|standups?|stand-ups?|meetings?|syncs?|retros?|sessions?|"
             "episodes?|chapters?|tests?|experiments?|alerts?|rfcs?|adrs?|changesets?|commits?|notes?|parts?")
# A word before the noun that makes it a verb ("we run 3 replicas", "to order 5 laptops") or a
# value ("assigned to ticket 404", "fixed in release 3.2").
_NOT_ID_BEFORE = {"i", "we", "you", "they", "he", "she", "it", "to", "will", "would", "can", "could", "should",
                  "must", "might", "may", "shall", "do", "does", "did", "don't", "please", "let's", "lets", "also",
                  "is", "are", "was", "were", "be", "been", "being", "in", "into", "with", "since", "until", "till",
                  "by", "for", "from", "before", "after", "at", "on", "than", "via", "per", "as", "about"}
# A quantity, not a name: "run 3 times", "order 5 laptops" is excluded by its verb, this by its unit.
_UNIT_AFTER = re.compile(r"\s*(?:%|percent|x\b|times?\b|minutes?\b|mins?\b|hours?\b|hrs?\b|days?\b|weeks?\b|"
                         r"months?\b|years?\b|seconds?\b|secs?\b|ms\b|[kmgt]b\b|am\b|pm\b|:\d)", re.I)
_NOUN_ID = re.compile(rf"\b(?P<noun>{_ID_NOUNS})\s+(?:{_DATE}|{_ID_NUM})(?![\w-])", re.I)
# Things counted after a number: "3 replicas", "4 new images" (a plural, not "is"/"has"/"this").
_THINGS_AFTER = re.compile(r"\s+(?:[a-z]+\s+)?(?!(?:is|was|has|does|this|thus|us|yes|as|its)\b)[a-z]{2,}s\b")
_HASH_ID = re.compile(r"(?<![\w&])#\s?(?P<n>\d+)\b")
# Tracker keys: NYL-520, OPS-17 (upper case as written); not names of standards ("UTF-8", "SHA-256").
_KEY_ID = re.compile(r"\b(?!(?:UTF|SHA|MD|IPV|HTTP|TLS|SSL|COVID|ISO|MP|H)-)(?P<k>[A-Z][A-Z0-9]{1,9}-\d+)\b")
_HEADING = re.compile(r"^\s*(?P<h>[^:\n]{1,60}?):\s")
_DATE_RE = re.compile(_DATE, re.I)
_NUM_RE = re.compile(r"\d(?:[\d.\-/]*\d)?")
_SUBJECT_DATE = (re.compile(rf"^\s*(?:the\s+)?(?P<w>[a-z][\w-]*)\s+{_DATE}", re.I),
                 re.compile(rf"^\s*(?:the\s+)?{_DATE}\s+(?P<w>[a-z][\w-]*)", re.I))
_NOT_A_NOUN = _NOT_ID_BEFORE | {"the", "a", "an", "and", "or", "but", "of", "our", "my", "your", "their", "its"}
# Beyond those nouns, a number right after a noun that a word before qualifies names one of a series
# too: "release candidate 3", "ws probe 0", "meeting room 3", "CI job 12". A plain number after a noun
# written in lower case (a name, "PostgreSQL 16", "Node 18", is a version: a value) with a word before
# it that is neither a verb nor a preposition ("production runs postgres 15", "billing uses mysql 8",
# "we are on node 18" give a version). Not a noun of a quantity or a setting, whose number is its value
# ("pool size 10", "the api port 8080", "locker code 4417"), nor a plural or a verb's third person
# ("replicas 3", "targets 17"), nor a number with a unit, a decimal or a time after it.
_SERIES_ID = re.compile(r"(?<![\w.'-])(?P<prev>[A-Za-z][a-z-]{0,30})\s+(?P<noun>[a-z][a-z-]{1,30})\s+"
                        r"(?P<n>\d{1,9})(?![\w%]|[.,:/-]\d)")
_VALUE_NOUNS = frozenset({
    "size", "limit", "timeout", "ttl", "cap", "quota", "threshold", "capacity", "budget", "price", "cost", "fee",
    "rate", "count", "total", "version", "level", "score", "target", "retention", "interval", "delay", "latency",
    "headcount", "port", "code", "pin", "number", "id", "password", "extension", "value", "setting", "default",
    "amount", "balance", "salary", "age", "weight", "height", "length", "width", "depth", "temperature", "speed"})


def _date_ident(m: re.Match[str]) -> str:
    month = (m["m1"] or m["m2"]).lower()[:3]
    return f"@{int(m['d1'] or m['d2'])} {month}" + (f" {m['y']}" if m["y"] else "")


def _a_series_noun(word: str, ending: str = "") -> bool:
    """Whether a word may be a noun of ``_SERIES_ID``: no verb, preposition, pronoun, time word, number
    word or noun of a quantity (by the word lists), no plural or third person ("runs", "uses"), no
    participle or adverb (the word before the noun may end in "ing": "meeting room 3")."""
    endings = tuple(e for e in ("ed", "ing", "ly") if e != ending)
    return not (word in _NOT_A_NOUN or word in _EMPTY or word in _STATE_WORDS or _lemma(word) in _STATE_WORDS
                or word in _SETTING_BEFORE or word in _VALUE_NOUNS or word in _DAY_WORDS or word in _MONTH_WORDS
                or word in _NUM_WORDS or _lemma(word) != word or word.endswith(endings))


def _identifiers(text: str) -> tuple[str, frozenset[str]]:
    """The text with the numbers that name its referent blanked out, and those names ("#1224",
    "nyl-520", "@16 nov")."""
    found: list[tuple[int, int, str]] = []
    for m in _KEY_ID.finditer(text):
        found.append((m.start(), m.end(), m["k"].lower()))
    for m in _HASH_ID.finditer(text):
        found.append((m.start(), m.end(), f"#{m['n']}"))
    for m in _NOUN_ID.finditer(text):
        before = re.findall(r"[\w']+", text[:m.start()].lower().replace("’", "'"))
        if before and before[-1] in _NOT_ID_BEFORE:
            continue
        if m["n"] is not None and _UNIT_AFTER.match(text, m.end()):
            continue
        # "Staging runs 3 replicas", "CI builds 4 images": a verb's third person counting things after
        # it, not run number 3 (a plural noun before a lone number rarely names one of a series)
        if m["n"] is not None and m["noun"].lower().endswith("s") and _THINGS_AFTER.match(text, m.end()):
            continue
        name = f"#{m['n']}" if m["n"] is not None else _date_ident(m)
        found.append((m.start("noun") + len(m["noun"]), m.end(), name))
    for m in _SERIES_ID.finditer(text):
        prev, noun = m["prev"].lower(), m["noun"]
        before = re.findall(r"[\w']+", text[:m.start()].lower().replace("\u2019", "'"))
        if (any(a <= m.start("n") < b for a, b, _ in found) or _UNIT_AFTER.match(text, m.end())
                or (before and before[-1] in _NOT_ID_BEFORE)  # "the retro is in meeting room 3": a value
                or not _a_series_noun(noun) or not _a_series_noun(prev, ending="ing")):
            continue
        found.append((m.start("n"), m.end("n"), f"#{m['n']}"))
    # A date heading the subject: "16 November standup ...", "Standup 16 November ..."
    for pattern in _SUBJECT_DATE:
        sub = pattern.match(text)
        if sub and sub["w"].lower() not in _NOT_A_NOUN:
            date = _DATE_RE.search(text, sub.start(), sub.end())  # the date only: the noun stays a word
            found.append((date.start(), date.end(), _date_ident(sub)))
    # A short heading with a number or date: "Sprint 14: ...", "Standup 16 November: ...".
    head = _HEADING.match(text)
    if head and len(head["h"].split()) <= 5:
        h0 = head.start("h")
        for m in _DATE_RE.finditer(head["h"]):
            found.append((h0 + m.start(), h0 + m.end(), _date_ident(m)))
        for m in _NUM_RE.finditer(head["h"]):
            if not any(a <= h0 + m.start() < b for a, b, _ in found):
                found.append((h0 + m.start(), h0 + m.end(), f"#{m.group(0)}"))
    chars = list(text)
    for a, b, _ in found:
        chars[a:b] = [" "] * (b - a)
    return "".join(chars), frozenset(name for _, _, name in found)


# A name a statement speaks of: capitalised, or letters and digits ("Terraform", "Google Meet", "eu-west-1").
# Starts at a word's start, and a word of letters then digits is short: unanchored, "[a-z]+\d" tried every
# start of a long run of letters and backtracked each to its end (20,000 "a"s: 40 s of a worker).
_OLD = r"(?<![\w.+#-])(?:the\s+|our\s+|their\s+|its\s+)?(?P<x>[A-Z][\w.+#-]{0,60}(?:\s+[A-Z][\w.+#-]{0,60})?|[a-z]{1,40}\d[\w.-]{0,40})"
# "We deploy the frontend with Vercel, not Netlify": a contrast names what is not used; it does not deny
# the statement, whose "not" would make it a negation (and no other rule reads a negated statement).
_CONTRAST = re.compile(rf"(?P<lead>,\s*)(?i:not)(?P<rest>\s+{_OLD})(?=\s*(?:[.!;,]|$))")


# "... the Pro plan at $39 per seat, not $35": a value, then after ", not" the value it gives up (a price,
# an amount, a share, with its "per seat" or "a month", or its unit, repeated or not: "after 60 minutes,
# not 15 minutes", "60 minutes, not 15"). No denial of the statement either: the value given up is no
# value it states, and its "not" no negation.
_AMOUNT = r"[$\u20ac\u00a3]?\d{1,9}(?:[.,]\d{1,3})*(?:k|m|%)?(?![\w.,]*\d)"
_PER = r"(?:\s+(?:per|a|an|each|every)\s+[a-z][\w-]{0,30}){0,3}"
_VALUE_UNIT = r"(?:\s+(?!(?:per|a|an|each|every|flat|not)\b)[a-z][a-z-]{0,30})?"
_VALUE_CONTRAST = re.compile(rf"(?<![\w.,$\u20ac\u00a3])(?P<new>{_AMOUNT})(?P<new_unit>{_VALUE_UNIT})(?P<new_per>{_PER})"
                             rf"(?:\s+flat)?,\s*(?i:not)\s+(?P<old>{_AMOUNT})(?P<old_unit>{_VALUE_UNIT})(?P<old_per>{_PER})"
                             r"(?=\s*(?:[.!;,)]|$))", re.I)


def statement(text: str, entities: list[str] | tuple[str, ...] = ()) -> Statement:
    text, named = _identifiers(text.replace("’", "'"))
    text = _VALUE_CONTRAST.sub(lambda m: m["new"] + m["new_unit"] + m["new_per"], text)
    text = _WHEN_CONTRAST.sub(lambda m: m["new"], text)  # the day given up is no denial of the statement
    low = _CONTRAST.sub(lambda m: m["lead"] + m["rest"], text).lower()
    for pat, rep in _CONTRACTIONS:
        low = re.sub(pat, rep, low)
    low = re.sub(r"n't\b", " not", low)
    toks = re.findall(r"[a-z0-9][a-z0-9.,:%']*[a-z0-9%]|[a-z0-9]", low)
    ent_toks = {t.lower() for e in entities for t in e.split()}
    neg = sum(1 for t in toks if t in _NEG or t == "not") % 2 == 1
    months = {m.lower() for m in MONTH_NAMES}
    numbers = frozenset(_numbers(toks)) | frozenset(m for m in months if m in toks)
    places = frozenset(t for t in toks if t in ent_toks) - numbers
    idents = frozenset(t for t in toks if t not in numbers and re.search(r"\d", t) and re.search(r"[a-z]", t))
    core = frozenset(_lemma(t) for t in toks if t not in _NEG and t != "not" and t not in _DROP
                     and t not in numbers and t not in _NUM_WORDS and t not in places and t not in months
                     and t not in idents)
    return Statement(negated=neg, core=core, numbers=numbers, places=places, idents=idents | named)


# The future's auxiliaries are no word of what is denied: "we will not use PostgreSQL 16 for the billing
# service" denies "We decided to use PostgreSQL 16 ... for the billing service".
_FUTURE = frozenset({"will", "shall"})


def _denies_a_detail_of(denial: Statement, claim: Statement) -> bool:
    """"We never deploy on Fridays" against "We deploy on Fridays at 14:00 after the freeze": the
    denial's every word, number, place and identifier is in the claim, which only adds detail ("the
    password is not orchid77" denies no detail of "the password is tulip42"). Three words at least: "I
    don't know" is contained in too many statements to deny any of them."""
    core = denial.core - _FUTURE
    return (len(core) >= 3 and core <= claim.core and len(core) * 2 >= len(claim.core)
            and denial.numbers <= claim.numbers and denial.places <= claim.places and denial.idents <= claim.idents)


# Clauses of a side the clause rule reads: a correction is a sentence or two.
_MAX_CLAUSES = 8


def _clauses(text: str, entities) -> list[Statement]:
    spans = ((sentence, s, e) for sentence in _sentences(text) for s, e in _clause_spans(sentence))
    return [statement(sentence[s:e], entities) for sentence, s, e in islice(spans, _MAX_CLAUSES)]


def _denied_clause(a_text: str, b_text: str, a_entities, b_entities) -> bool:
    """A clause of one side denies what a clause of the other states (``_denies_a_detail_of``), where
    one side says more than one thing: "Correction: we will not use PostgreSQL 16 for the billing
    service; we decided to use MySQL 8 instead" denies "We decided to use PostgreSQL 16 as the primary
    database for the billing service", though its second clause (and its one "not" in the whole text)
    made the text no denial of it. Not a denial of another thing ("... not use PostgreSQL 16 for
    analytics"), nor another value denied ("... is not orchid77")."""
    a_clauses, b_clauses = _clauses(a_text, a_entities), _clauses(b_text, b_entities)
    if len(a_clauses) + len(b_clauses) <= 2:
        return False  # one clause each: the whole texts were compared
    for xs, ys in ((a_clauses, b_clauses), (b_clauses, a_clauses)):
        for denial in (x for x in xs if x.negated):
            if any(not claim.negated and _denies_a_detail_of(denial, claim) for claim in ys):
                return True
    return False


def _ident_kind(name: str) -> str:
    """What sort of name an identifier is: "v29" and "v59" are two versions ("v#"), "b1042" and
    "b1043" two builds, "#404" and "#408" two tickets, NYL-520 and OPS-17 two tracker keys, two dates
    two standups; "Q4" and "SOC2" are not the same sort of name ("q#" vs "soc#")."""
    if name.startswith(("#", "@")):
        return name[0]
    if re.fullmatch(r"[a-z][a-z0-9]*-\d+", name):
        return "key"
    return re.sub(r"\d[\d.\-/]*", "#", name)


_ANCHOR_STOP = frozenset(_DROP | _NOT_ID_BEFORE | {"and", "or", "is", "are", "was", "were", "be", "our", "their",
                                                    "my", "your", "its", "this", "that", "these", "those"})


def _ident_neighbours(text: str, idents: frozenset[str]) -> set[str]:
    """The words right beside the identifiers in the text ("SOC2 audit" → audit, "plan v29" → plan)."""
    toks = re.findall(r"[a-z0-9][a-z0-9.,:%']*[a-z0-9%]|[a-z0-9]", text.lower().replace("\u2019", "'"))
    out: set[str] = set()
    for i, t in enumerate(toks):
        if t in idents:
            out |= {_lemma(w) for w in toks[max(i - 1, 0):i] + toks[i + 1:i + 2]
                    if w not in _ANCHOR_STOP and not re.search(r"\d", w)}
    return out


# Where a value stands: after a copula ("the PagerDuty escalation code is PX-7781"), "is now", a colon.
_IS_SLOT = re.compile(r"\b(?:is|are|was|were)\s+(?:(?:now|currently|still)\s+)?|[:=]\s*", re.I)


@lru_cache(maxsize=64)  # read by _other_referents and _other_value, of both sides of each pair
def _value_idents(text: str, idents: frozenset[str]) -> tuple[tuple[str, frozenset[str]], ...]:
    """The identifiers the text gives as a value, each with the words of what it is the value of:
    right after a copula, a colon or a change to it ("The PagerDuty escalation code is PX-7781" →
    pagerduty, escalation, code; "... changed to PX-9902", "rotated ... to whsec-9051"); not one the
    statement opens with or puts after a preposition ("Ticket PX-7781 is closed", "the fix for
    PX-7781"). The first few only: a text is one statement or two."""
    out: dict[str, frozenset[str]] = {}
    read = 0  # each costs a statement of the whole text: "is now orchid77" x 500 is not 500 values
    for pattern in (_IS_SLOT, _VALUE_CHANGE) if idents else ():
        for m in pattern.finditer(text) if read < 4 else ():
            tok = _Y_TOKEN.match(text, m.end())
            if not tok or (t := tok.group(0).rstrip(".,:;").lower()) not in idents or t in out:
                continue
            # the statement without the copula or the change and without the value: what has the value
            rest = f"{text[:m.start()]} {m.groupdict().get('obj') or ''} {text[tok.end():]}"
            thing = frozenset(statement(rest).core - _NOT_THING)
            if len(thing) >= 2:  # "the code", "the fix" alone are too general to be one thing
                out[t] = thing
            read += 1
            if read >= 4:
                break
    return tuple(out.items())


def _values_of_one_thing(a_text: str, b_text: str, a: Statement, b: Statement) -> tuple[set[str], set[str]]:
    """The identifiers each side gives as the value of a thing the other gives one too."""
    vals_a, vals_b = _value_idents(a_text, a.idents), _value_idents(b_text, b.idents)
    things_a, things_b = {thing for _, thing in vals_a}, {thing for _, thing in vals_b}
    return ({t for t, thing in vals_a if thing in things_b}, {t for t, thing in vals_b if thing in things_a})


def _other_value(a_text: str, b_text: str, a: Statement, b: Statement) -> str | None:
    """"The office wifi password is tulip42" vs "The office wifi password is orchid77": one thing
    given two letters-and-digits values, which the same-statement rule does not read (they are no
    numbers)."""
    if a.negated or b.negated:
        return None
    vals_b = _value_idents(b_text, b.idents)
    for va, thing in _value_idents(a_text, a.idents) if vals_b else ():
        for vb, other in vals_b:
            if thing == other and va != vb:
                return f"different value for the same statement: {va} vs {vb}"
    return None


def _other_referents(a_text: str, b_text: str, a: Statement, b: Statement) -> bool:
    """Whether the two name different things: each has an identifier the other lacks, and two of
    them are names of one sort ("release plan v29" vs "v59", "CI run 1224" vs "1227") or stand beside
    the same word ("the SOC2 audit" vs "the ISO27001 audit"). Other letters-and-digits words are
    detail of one side, not another referent: "The Q4 release freeze starts December 14" and "the
    release freeze now starts December 7 for the SOC2 audit" speak of one freeze. Nor is an
    identifier given as the value of a thing the other gives a value too (``_value_idents``): "the
    PagerDuty escalation code is PX-7781" and "... changed to PX-9902" are one code's two values,
    which the value rules compare; "the Opsgenie escalation code changed to PX-9902" is another code."""
    values_a, values_b = _values_of_one_thing(a_text, b_text, a, b)
    only_a = a.idents - b.idents - values_a
    only_b = b.idents - a.idents - values_b
    if not only_a or not only_b:
        return False
    if {_ident_kind(x) for x in only_a} & {_ident_kind(y) for y in only_b}:
        return True
    return bool(_ident_neighbours(a_text, only_a) & _ident_neighbours(b_text, only_b))


def _differ(a: frozenset[str], b: frozenset[str]) -> bool:
    """Both sides name something the other does not. One being a subset of the other is a more (or
    less) detailed statement — "in 2020" vs "in May 2020", "Berlin" vs "Berlin, Germany" — not a
    contradiction."""
    return bool(a - b) and bool(b - a)


# "I live in Berlin" vs "I moved away from Berlin": a plain contradiction with no shared wording.
_STAY = re.compile(r"\b(?:live|lives|living|reside|resides|residing|based|work|works|working|stay|stays|staying)"
                   r"\s+(?:in|at|for|near)\s+(?:the\s+)?([a-z0-9][\w'-]*)")
_LEAVE = re.compile(r"\b(?:left|leave|leaves|leaving|quit|quits|quitting|"
                    r"(?:moved|move|moves|moving|relocated)\s+(?:away\s+|out\s+)?(?:from|of))"
                    r"\s+(?:the\s+)?([a-z0-9][\w'-]*)")


def _left_place(a_text: str, b_text: str, a: Statement, b: Statement) -> str | None:
    if a.negated or b.negated:
        return None
    for x, y in ((a_text, b_text), (b_text, a_text)):
        stays = {m.group(1) for m in _STAY.finditer(x.lower())} & (a.places | b.places)
        left = {m.group(1) for m in _LEAVE.finditer(y.lower())}
        if stays & left:
            return sorted(stays & left)[0]
    return None


# "Production runs Postgres 15" vs "We migrated production to Postgres 16": one states what a system
# runs, the other that it was changed to another version of the same thing, in different words.
_RUNS = r"(?:runs?|running|uses?|using|is|are|is\s+on|are\s+on|'s\s+on|'re\s+on|stays?\s+on|still\s+on|pinned\s+to)"
_CHANGED_TO = (r"(?:(?:migrated|migrating|moved|moving|upgraded|upgrading|downgraded|downgrading|switched|"
               r"switching|updated|bumped|rolled\s+back|went)\b[^.;:!?]*?\bto|"
               # the version given as the current one: "staging is now on Redis 7.4"
               r"(?:is|are|'s|'re)\s+now(?:\s+(?:on|at|running|using))?)")
# A version right after a name: "Postgres 16", "Redis 7.4", "Python 3.12"; not a quantity ("26 minutes").
_VERSION_OF = r"(?:the\s+)?(?:[a-z][\w-]*\s+){{0,2}}?{name}\s+v?(\d+(?:\.\d+)*)(?![\w.]*\s*(?:%|percent|minutes?|mins?|" \
              r"hours?|days?|weeks?|months?|years?|seconds?|secs?|ms|gb|mb|tb|kb|times|x)\b)"
_STATE_WORDS = {"run", "running", "ran", "use", "using", "used", "on", "to", "stay", "still", "pinned", "migrated",
                "migrating", "moved", "moving", "upgraded", "upgrading", "downgraded", "downgrading", "switched",
                "switching", "updated", "bumped", "rolled", "back", "went", "we", "our", "us", "they", "be", "have",
                "had", "from", "version", "in", "of", "for", "with", "at", "is", "are", "was", "were", "been", "and",
                "i", "my", "me", "it", "its", "this", "that", "these", "those", "all", "last", "next",
                "now", "finally", "already", "today", "yesterday", "tomorrow", "tonight", "night", "morning",
                "week", "month", "year", "ago", "since", "monday", "tuesday", "wednesday", "thursday", "friday",
                "saturday", "sunday"}


def _context(text: str, name: str) -> frozenset[str]:
    """What a version statement says beside the thing and its version: its subject ("production",
    "the staging cluster"), for telling "staging runs 15" from "production moved to 16"."""
    months = {m.lower() for m in MONTH_NAMES}
    words = (_lemma(t) for t in re.findall(r"[a-z][a-z'-]*", text) if "'" not in t and t != name)
    return frozenset(t for t in words if t not in _STATE_WORDS and t not in _DROP and t not in _NEG
                     and t not in months and t not in _NUM_WORDS)


def _versions(text: str, name: str, verbs: str) -> set[str]:
    return {m.group(1) for m in re.finditer(rf"\b{verbs}\s+{_VERSION_OF.format(name=re.escape(name))}", text)}


def _changed_version(a_text: str, b_text: str, a: Statement, b: Statement) -> str | None:
    """The same named thing at two versions, one said to run it and the other to have moved to
    another: only when both say it of the same subject (their remaining words agree, one perhaps
    with more detail), so "staging runs Postgres 15" and "we moved production to Postgres 16" stay
    two statements."""
    if a.negated or b.negated:
        return None
    low_a, low_b = a_text.lower().replace("’", "'"), b_text.lower().replace("’", "'")
    # The thing is a name both mention: an entity of both, or (chat in lower case) a word both put a
    # version after.
    named = {m.group(1) for m in re.finditer(r"\b([a-z][a-z-]+)\s+v?\d", low_a)}
    named &= {m.group(1) for m in re.finditer(r"\b([a-z][a-z-]+)\s+v?\d", low_b)}
    # (not a month written short: "Nov 20" is a date, not Nov at version 20)
    for name in sorted((a.places & b.places) | (named - _STATE_WORDS - _DROP - _MONTH_WORDS)):
        ctx = (_context(low_a, name), _context(low_b, name))
        # (neither naming a subject, "We use Postgres 15" and "We moved to Postgres 16", is one subject)
        if (not (ctx[0] & ctx[1]) and (ctx[0] or ctx[1])) or _differ(*ctx):
            continue
        for x, y in ((low_a, low_b), (low_b, low_a)):
            runs, moved = _versions(x, name, _RUNS) | _versions(x, name, _CHANGED_TO), _versions(y, name, _CHANGED_TO)
            if runs and moved and not runs & moved:
                return (f"different number or date for the same statement: {name} "
                        f"{', '.join(sorted(runs))} vs changed to {', '.join(sorted(moved))}")
    return None


# A count of things in a status line: "7 tickets", "21 of 34 points", "2 blocked", "3 open".
_COUNT = re.compile(
    r"\b(\d+(?:[.,]\d+)?)(?=\s+(?:of\s+\d+(?:[.,]\d+)?\b|(?:[a-z]+\s+)?(?!is\b|was\b|has\b|does\b|this\b|"
    r"thus\b|us\b|yes\b)[a-z]+s\b|(?:blocked|done|open|closed|left|remaining|pending|failed|failing|passed|"
    r"passing|green|red|new|active|resolved|merged|in\s+progress|to\s+go)\b|"
    # ... or any state a tally ends its item with ("7 escalated,", "4 reopened.")
    r"[a-z]{3,}ed(?=\s*(?:[,;.]|$))))", re.I)
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)?\b")


# "The cutover is on December 4" vs "The cutover moves to December 9": one statement moves a thing
# to another day than the other gives it, in other words than "is on". A move verb with its "to".
_MOVED = re.compile(r"\b(?:re-?schedul(?:e|ed|es|ing)|postpon(?:e|ed|es|ing)|push(?:ed|es)?(?:\s+back)?|"
                    r"mov(?:e|ed|es|ing)|delay(?:ed|s)?|slip(?:s|ped)?|shift(?:ed|s)?|bump(?:ed|s)?)\b"
                    r"[^.;]{0,200}?\b(?:to|until|till)\s+(?:next\s+|the\s+)?"
                    # ... to a day or a time ("moved to the new office" is a move, not a new date), not to a
                    # quantity of things ("moved the pool size to 12 workers" is a changed value)
                    r"(?:\d(?![\d.,]*\s+(?!(?:this|thus|was|has|does|is|us|yes|as)\b)[a-z]{2,}s\b)|"
                    r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b)",
                    re.I)
_WEEKDAYS = frozenset({"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"})
# What does not name the thing moved: the moving, the copula, prepositions and who speaks.
_NOT_SUBJECT = frozenset({
    "move", "moved", "moves", "moving", "reschedule", "rescheduled", "reschedules", "rescheduling",
    "postpone", "postponed", "postpones", "postponing", "push", "pushed", "pushes", "back", "delay",
    "delayed", "delays", "slip", "slipped", "slips", "shift", "shifted", "shifts", "bump", "bumped",
    "bumps", "until", "till", "be", "is", "was", "were", "will", "been", "has", "have", "had", "now",
    "on", "in", "for", "by", "from", "of", "and", "we", "i", "they", "you", "he", "she", "it", "our",
    "their", "my", "your", "next", "this", "week", "day"})


# What a chat line puts around the statement and does not name the thing: a lead-in ("Update:",
# "Heads up,", "FYI") and the reason given for the move ("... because of the change freeze").
_LEAD_IN = re.compile(r"^\s*(?:(?:update|updated|heads[\s-]+up|fyi|note|quick\s+note|reminder|psa|btw|ok(?:ay)?|so|"
                      r"correction|change\s+of\s+plans?|news|important|good\s+news|bad\s+news)\b(?!\s+\d)[\s:,;!.\u2014-]*)+",
                      re.I)
_REASON = re.compile(r"(?:,|\s)\s*(?:\(|\u2014\s*|-\s+)?(?:because|due\s+to|owing\s+to|thanks\s+to|given\s+that|"
                     r"so\s+that|as\s+a\s+result\s+of|in\s+order\s+to)\b.*$", re.I | re.S)


_DAY_WORDS = _WEEKDAYS | {m.lower() for m in MONTH_NAMES}
_CLOCK = re.compile(r"^\d+(?::\d+)?(?:am|pm|st|nd|rd|th)$|^\d+:\d+$")
# Words that say a date is one ("is due November 29" vs "the deadline is now December 6", "is on June
# 12" vs "now happens on June 19"): no part of the thing dated.
_WHEN_WORDS = frozenset({"due", "deadline", "date", "scheduled", "planned", "slated", "happen", "held", "take",
                         "place", "fall"})
# A day or a time, as written (the date without its named groups: it is used more than once in a pattern).
_WHEN = (rf"(?:{re.sub(r'[(][?]P<[a-z0-9]+>', '(?:', _DATE)}|\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|"
         r"\b\d{1,2}(?::\d\d)?\s*(?:am|pm)\b|\b\d{1,2}:\d\d\b|\b\d{1,2}(?:st|nd|rd|th)\b)")
_WHEN_MENTION = re.compile(_WHEN, re.I)
# A day or time given with the one it replaces: "the standup is at 10:00, not 9:30", "the review is on
# Thursday, not Friday".
_WHEN_CONTRAST = re.compile(rf"(?P<new>{_WHEN}),?\s+(?:and\s+)?not\s+(?:(?:at|on|the)\s+)?(?P<old>{_WHEN})"
                            r"(?=\s*(?:[.!;,)]|$))", re.I)
# A new date given as the current one: "now" or "instead" must give the date itself — "the release
# freeze now starts December 7", "the deadline is now December 6", "is now on the 15th", "the kickoff
# is on the 19th instead". A "now" of something else in the same text ("the report is now in review
# and the board meeting is on October 5", "we now have a runbook ... and a dry run on Thursday") moves
# no date. Not "for now", "right now", "until now"; "from now on" opens the clause it dates.
_NOW_DATE = re.compile(
    r"(?<!\bfor )(?<!\bright )(?<!\bjust )(?<!\buntil )(?<!\btill )(?<!\bby )(?<!\bfrom )\bnow\s+"
    # a verb of the date between: "now starts", "now takes place", "now goes out", "is now sent"
    r"(?:(?:is|are|be|due|[a-z]{2,})(?:\s+(?:off|out|up|live|place|due|scheduled|set|planned|slated|held))?\s+)?"
    rf"(?:(?:on|at|for|from|in|by)\s+)?(?:the\s+)?(?:next\s+)?{_WHEN}"
    rf"|{_WHEN}\s+instead\b|\binstead\s+(?:(?:on|at|for)\s+)?(?:the\s+)?{_WHEN}"
    # ... or a clause opened as the new rule: "From now on the demo is on Friday", "As of today standup is at 10"
    rf"|\b(?:from\s+now\s+on|as\s+of\s+(?:now|today)|starting\s+(?:now|today))\b[^.;]{{0,200}}?{_WHEN}", re.I)
# What a dated statement is for: an occasion is the reason of its date ("... now starts December 7 for
# the SOC2 audit": the audit is not the thing dated), a scope narrows the thing ("the nightly backup
# now runs at 3am for the EU region" is the EU region's backup, not the one at 2am).
_OCCASIONS = ("audits?|reviews?|launch(?:es)?|releases?|demos?|offsites?|onsites?|meetings?|calls?|kick-?offs?|"
              "retros?|retrospectives?|workshops?|conferences?|summits?|events?|visits?|trips?|presentations?|"
              "prep|preparations?|holidays?|breaks?|freezes?|cutovers?|rollouts?|go-lives?|migrations?|deadlines?|"
              "interviews?|hackathons?|trainings?|webinars?|parties|party|celebrations?|standups?|syncs?|"
              "sessions?|planning|handovers?|deploys?|deployments?|upgrades?|outages?|board|renewals?|"
              "negotiations?|pitch(?:es)?")
_FOR_OCCASION = (r"for\s+(?=(?:(?:the|a|an|our|their|its|this|that|next|upcoming)\s+)?(?:[\w-]+\s+){0,3}?"
                 rf"(?:{_OCCASIONS})\b)")
# What follows the date: the reason or occasion ("... December 7 for the SOC2 audit", "... because of").
_AFTER_DATE = re.compile(rf"^[\s,]*(?:\(|\u2014\s*|-\s+)?(?:{_FOR_OCCASION}|because|due\s+to|owing\s+to|thanks\s+to|"
                         r"given\s+that|so\s+that|as\s+a\s+result\s+of|in\s+order\s+to|ahead\s+of|after)\b.*$",
                         re.I | re.S)
_FOR = re.compile(r"\bfor\s+", re.I)
_OCCASION_AHEAD = re.compile(_FOR_OCCASION, re.I)
# Words that end a "for" phrase: a verb, a preposition, a time ("scheduled for May 20" is a date).
_SCOPE_END = _NOT_ID_BEFORE | _DAY_WORDS | {"and", "or", "but", "so", "then", "now", "that", "which", "who", "while",
                                            "morning", "afternoon", "evening", "night", "tonight", "today", "tomorrow",
                                            "week", "weekend", "month", "quarter", "year", "next", "instead"}


def _scope(text: str) -> frozenset[str]:
    """The words of the scopes a statement is narrowed to ("for the EU region" → eu, region; "Code
    freeze for v3" → v3). Not an occasion ("for the SOC2 audit"), a date ("scheduled for May 20"), a
    duration ("for two hours") nor "for now"."""
    out: set[str] = set()
    for m in _FOR.finditer(text):
        if _OCCASION_AHEAD.match(text, m.start()) or _WHEN_MENTION.match(text, m.end()):
            continue
        words = []
        for tok in re.findall(r"[\w'-]+", text[m.end():].lower())[:5]:
            if tok in _SCOPE_END or _NUM.match(tok) or tok in _NUM_WORDS:
                break
            words.append(tok)
        out |= {_lemma(w) for w in words if w not in _EMPTY}
    return frozenset(out)


def _words(text: str) -> frozenset[str]:
    return frozenset(_lemma(t) for t in re.findall(r"[\w'-]+", text.lower()))


# Where a text's clauses meet: "...; their sign-off meeting is December 3", "... and the board meeting
# is on October 5", "..., but the retro is Monday". An "and" only before a new subject, and only once
# the clause before has its verb: "The design review and the retro moved to Friday" is one clause.
# (Tried at the start of a run of spaces only: from inside one every try rescanned the run, quadratic in
# its length.)
_CLAUSE_BREAK = re.compile(r"(?<!\s)(?:\s*;\s*|\s+[\u2014\u2013-]\s+|,?\s+(?:but|while|whereas|although|though)\s+|"
                           # a result after a comma: "marketing moved the campaign, so the freeze now runs ..."
                           r",\s+so\s+(?=(?:the|a|an|our|their|its|we|they|it|i|he|she|this|that|these|those)\b)|"
                           r",?\s+(?P<and>and)\s+(?=(?:the|a|an|our|their|its|his|her|we|they|it|i|he|she|this|"
                           r"that|these|those)\b))", re.I)
_HAS_VERB = re.compile(rf"\b(?:is|are|was|were|will|would|has|have|had|now|can|could|do|does|did)\b|'s\b|'re\b|"
                       rf"\b\w{{3,}}ed\b|{_WHEN}", re.I)


def _clause_spans(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in _CLAUSE_BREAK.finditer(text):
        if m["and"] and not _HAS_VERB.search(text, start, m.start()):
            continue
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return [(s, e) for s, e in spans if text[s:e].strip()]


def _date_clause_spans(text: str) -> list[list[tuple[int, int]]]:
    """The clauses the date rules read: those of the whole text (a sentence naming the thing and the
    next moving it, "Re the offsite. Moved to Friday.", stay one) and, in a text of more sentences,
    those of each sentence too ("... so the freeze now runs from Nov 24 to Dec 2. Deploys on Nov 20-23
    are allowed again.": the freeze's clause without the next sentence's words)."""
    whole = _clause_spans(text)
    start, sentences = 0, []
    for m in _END.finditer(text):
        if m.group(0) == "." and _NO_END.search(text[start:m.end()]):
            continue
        if text[start:m.end()].strip():
            sentences.append((start, m.end()))
        start = m.end()
    if text[start:].strip():
        sentences.append((start, len(text)))
    if len(sentences) < 2:
        return [whole]
    return [whole, [(s0 + s, s0 + e) for s0, e0 in sentences for s, e in _clause_spans(text[s0:e0])]]


def _clause_of(text: str, start: int, end: int, spans: list[tuple[int, int]] | None = None) -> str:
    """The clauses of the text (``spans``: its ``_clause_spans``) from the one holding ``start`` to
    the one holding ``end``."""
    spans = [(s, e) for s, e in (_clause_spans(text) if spans is None else spans) if e > start and s < end]
    spans = spans or [(0, len(text))]
    return text[spans[0][0]:spans[-1][1]]


def _dated_text(text: str) -> str:
    """The text without what follows its last date when that is a reason or an occasion."""
    ends = [m.end() for m in _WHEN_MENTION.finditer(text)]
    if not ends:
        return text
    return text[:ends[-1]] + _AFTER_DATE.sub("", text[ends[-1]:], count=1)


def _subject_text(text: str) -> str:
    """The text without its lead-in, and without the reason a move gives after it ("moved to January
    9th because of the freeze"). Only there: a "due to" or "so that" before the move, or in a line
    that moves nothing, names the thing ("the payment due to Acme", "the launch, due to the Acme
    contract, is on March 3")."""
    text = _LEAD_IN.sub("", text, count=1)
    moved = _MOVED.search(text)
    if moved is None:
        return text
    return text[:moved.end()] + _REASON.sub("", text[moved.end():], count=1)


def _when_words(text: str, st: Statement) -> list[str]:
    """The days a side names, as written ("December 14th", "Friday"), for the reason line; its
    numbers when it names no date."""
    dates = [m.group(0).strip() for m in _DATE_RE.finditer(text)]
    days = [w.capitalize() for w in sorted(st.core & _WEEKDAYS)]
    return dates + days or sorted(st.numbers)


@dataclass(frozen=True)
class _Dated:
    """A clause giving a thing a day or a time: what it dates, when, and whether it is a day."""
    text: str
    what: frozenset[str]
    when: frozenset[str]
    scope: frozenset[str]
    words: frozenset[str]
    st: Statement

    @property
    def is_day(self) -> bool:
        return bool(self.when & (_DAY_WORDS | _MONTH_SHORT)) or any(_CLOCK.match(n) for n in self.when)


# A period's words are no part of the thing it dates: "the freeze runs from Nov 20 through Nov 30",
# "no deploys from Friday Nov 20 to Monday Nov 30 inclusive" (the verb only before the range).
_RANGE_WORDS = re.compile(r"\b(?:runs?|ran|running|lasts?|lasted|lasting|spans?|spanning)\s+"
                          r"(?=(?:from|between|until|till|through|thru)\b)|\b(?:through|thru|inclusive)\b", re.I)
# Months as a date writes them short ("Nov 20", "Dec 2"): day words of the date, not words of the thing.
_MONTH_SHORT = frozenset(m.lower()[:3] for m in MONTH_NAMES) | {"sept"}


def _dated(clause: str) -> _Dated:
    # Without entities, names count as words here ("Standup" opening a sentence is read as one)
    subject = _subject_text(clause) if _MOVED.search(clause) else _dated_text(clause)
    st = statement(clause)
    days = _WEEKDAYS | (_MONTH_SHORT if _WHEN_MENTION.search(clause) else frozenset())
    return _Dated(clause, statement(_RANGE_WORDS.sub(" ", subject)).core - days - _NOT_SUBJECT - _WHEN_WORDS,
                  st.numbers | (st.core & days), _scope(subject), _words(clause), st)


def _date_changes(text: str) -> list[tuple[_Dated, bool]]:
    """The clauses of the text that move a thing (True) or give it a date "now" (False), each once.

    Once: a clause with many moves or "now"s (a text with no clause breaks is one clause) was parsed
    again for each of them, ~60 parses of the same 1,000 characters (270 ms a pair; a crafted write
    cost its worker seconds over its candidates), and compared again for each."""
    out: dict[tuple[str, bool], _Dated] = {}
    for spans in _date_clause_spans(text):
        for pattern, moved in ((_MOVED, True), (_NOW_DATE, False)):
            for m in pattern.finditer(text):
                clause = _clause_of(text, m.start(), m.end(), spans)
                if (clause, moved) not in out:
                    out[clause, moved] = _dated(clause)
    return [(dated, moved) for (_clause, moved), dated in out.items()]


# A period: "from Friday Nov 20 through Monday Nov 30", "between Dec 24 and Jan 2", "Nov 20-23".
_DAY = rf"(?:{_WHEN}\s*,?\s+)?{_WHEN}"
_PERIOD = (rf"(?:from\s+)?{_DAY}\s*(?:(?:through|thru|to|until|till)\s+|[-\u2013]\s*)(?:{_DAY}|\d{{1,2}}\b)|"
           rf"between\s+{_DAY}\s+and\s+{_DAY}")
# "No production deploys from Friday Nov 20 through Monday Nov 30": a ban over a period says what the
# period is (a freeze), it denies no date; its "no" is no negation of the dated statement.
_BAN = re.compile(rf"\bno\s+(?!longer\b|more\b)(?=(?:[\w'-]+\s+){{0,3}}?{_PERIOD})", re.I)


def _denied(text: str, st: Statement) -> bool:
    """Whether the statement is negated, a ban's "no" over a period aside."""
    return st.negated and (not _BAN.search(text) or statement(_BAN.sub(" ", text)).negated)


# The verbs and nouns of an event's coming: "we will ship the new checkout page on December 4" and "the
# checkout page launch moves to December 9" date one event, the checkout page's release.
_RELEASE_WORDS = frozenset({"ship", "ships", "shipping", "shipped", "launch", "launches", "launching", "launched",
                            "release", "releases", "releasing", "released", "rollout", "roll", "rolling", "rolls",
                            "out", "go", "goes", "going", "live", "go-live", "new"})


def _same_dated_thing(x: frozenset[str], y: frozenset[str]) -> bool:
    """Whether two clauses date one thing: one's words within the other's, or the same words once
    those of a release are set aside ("ship the checkout page" / "the checkout page launch"; not "the
    checkout page design review", another event)."""
    if x <= y or y <= x:
        return True
    return bool(x - _RELEASE_WORDS) and x - _RELEASE_WORDS == y - _RELEASE_WORDS


_RECURRENCE = frozenset({"every", "each", "daily", "weekly", "monthly", "day", "week", "month", "morning",
                         "afternoon", "evening", "usual", "usually", "always", "regular", "regularly"})


def _contrasted_when(a_text: str, b_text: str) -> str | None:
    """One side gives a thing a day or a time and, after ", not", the one it gives up ("the standup
    is at 10:00, not 9:30"); the other dates the same thing (one side's words within the other's) at
    the day or time given up ("the standup is at 9:30 every day")."""
    for x_text, y_text, x_first in ((a_text, b_text, True), (b_text, a_text, False)):
        if _NOT_DONE.search(x_text):
            continue
        m = _WHEN_CONTRAST.search(x_text)
        if m is None:
            continue
        given = _dated(x_text[:m.end("new")] + x_text[m.end():])
        old = _dated(f"at {m['old']}").when
        if not given.what or not old:
            continue
        new = _dated(f"at {m['new']}").when
        for y in (_dated(y_text[s:e]) for spans in _date_clause_spans(y_text) for s, e in spans):
            if y.st.negated or not (old & y.when) or not y.what:
                continue
            # a clause that gives the new time too, or moves or calls off the old one, agrees ("moved
            # the standup from 9:30 to 10:00", "the 9:30 slot is cancelled")
            if (new & y.when or _MOVED.search(y.text) or re.search(rf"\b{_CALLED_OFF}\b|\bfrom\b", y.text, re.I)):
                continue
            # the other side dates this thing, with no other words than a recurrence ("every day"):
            # "lunch orders are due at 12:00" is not lunch, "the 2pm meeting with Acme" one meeting
            if y.what - _RECURRENCE <= given.what:
                first, second = (m["new"], m["old"]) if x_first else (m["old"], m["new"])
                return f"rescheduled: {first} vs {second}"
    return None


def _rescheduled(a_text: str, b_text: str, a: Statement, b: Statement) -> str | None:
    """One side moves the thing the other dates to another day: their days or dates differ, one says
    it moved, and what is left once days, dates and the moving words are out names the same thing
    (one side's words within the other's). Only the clause of the move and a clause of the other side
    holding a date are compared: "the vendor contract is signed; the kickoff is now on June 4" moves
    the kickoff. A lead-in ("Update:") and the move's reason ("because of the freeze") are not part of
    the thing. The pairs compared are already each other's nearest. A side that gives its date as the
    current one ("the freeze now starts December 7 for the SOC2 audit") moves it too, in fewer words;
    what follows its date is then the reason or the occasion ("the SOC2 audit starts March 3" is not
    the thing moved), unless it is a scope ("for the EU region"): a scope only one of the two names
    makes them different things. A ban over a period ("no deploys from Nov 20 through Nov 30") is no
    denial: it dates the period."""
    if _denied(a_text, a) or _denied(b_text, b):
        return None
    for x_text, y_text, x_first in ((a_text, b_text, True), (b_text, a_text, False)):
        # A move only proposed or weighed ("we might move the freeze to December 7 if ...") moves nothing.
        if _NOT_DONE.search(x_text):
            continue
        dated_y = [_dated(c) for c in dict.fromkeys(y_text[s:e] for spans in _date_clause_spans(y_text)
                                                    for s, e in spans)]
        for x, moved in _date_changes(x_text):
            for y in dated_y:
                if not x.when or not y.when or not _differ(x.when, y.when):
                    continue
                # "now" moves a date, not any number ("the API timeout is now 30 seconds")
                if not moved and not (x.is_day and y.is_day):
                    continue
                # a bare number no day or hour can be is a value moved ("bumped the max pool size to
                # 50"): the changed-value rule names it so, not "rescheduled"
                if not x.is_day and any(w.isdigit() and int(w) > 31 for w in x.when | y.when):
                    continue
                if not x.what or not y.what or not _same_dated_thing(x.what, y.what):
                    continue
                # a scope narrows a date given "now"; after a move's date "for" more often says whom it
                # suits ("moved the demo to Friday for the Globex team"), and the thing moved is its object
                if not moved and not (x.scope <= y.words and y.scope <= x.words):
                    continue
                first, second = (x, y) if x_first else (y, x)
                return (f"rescheduled: {', '.join(_when_words(first.text, first.st))} vs "
                        f"{', '.join(_when_words(second.text, second.st))}")
    return None


# "Atlas will launch on December 21" vs "The Atlas launch date is December 14": the date of one event,
# told with its verb on one side and its noun on the other ("will ship on" / "the ship date is", "goes
# live on" / "the go-live is on", "launches on" / "the launch of Atlas is on"), which share too few
# words for the same-statement rule and move nothing for ``_rescheduled``. A whole clause only, the
# date at its end: "will launch in the EU on ..." or "... for all customers" dates a narrower event.
_EVENT_AUX = (r"(?:(?:will|shall|(?:is|are)\s+(?:going|set|scheduled|planned|due|slated)\s+to)\s+)?")
_EVENT_IS = r"(?:is|will\s+be|falls\s+on|is\s+(?:set|scheduled|planned|slated)\s+for)"
_EVENT_WHEN = rf"(?:(?:on|at)\s+)?(?:the\s+)?(?P<when>{_WHEN})\s*[.!]?\s*$"
# (a subject of a verb or a noun: no copula, no "of"/"for", which the third form reads)
_EVENT_SUBJECT = r"(?:(?:the|our|their)\s+)?(?P<subj>(?:(?!(?:is|are|will|of|for)\b)[\w'-]{1,40}\s+){0,3}?)"
_NOT_EVENT = r"(?!(?:is|are|was|were|be|been|will|shall|not|date|day|also|still|now|on|at|in|of|for|by|to)\b)"
_EVENT_DATES = (
    # "<subject> (will) <verb> (off|live|out) on <date>"
    re.compile(rf"^{_EVENT_SUBJECT}{_EVENT_AUX}{_NOT_EVENT}(?P<ev>[a-z]{{2,40}})(?:\s+(?P<part>off|live|out))?\s+"
               rf"{_EVENT_WHEN}", re.I),
    # "<subject> <noun> (date|day) is <date>"
    re.compile(rf"^{_EVENT_SUBJECT}{_NOT_EVENT}(?P<ev>[a-z][\w-]{{1,40}})\s+(?:(?:date|day)\s+)?{_EVENT_IS}\s+"
               rf"{_EVENT_WHEN}", re.I),
    # "the <noun> (date) of <subject> is <date>"
    re.compile(rf"^the\s+(?P<ev>[a-z][\w-]{{1,40}})\s+(?:(?:date|day)\s+)?(?:of|for)\s+(?:the\s+)?"
               rf"(?P<subj>[\w'-]{{1,40}}(?:\s+[\w'-]{{1,40}}){{0,2}}?)\s+{_EVENT_IS}\s+{_EVENT_WHEN}", re.I),
)


def _event_stem(word: str) -> str:
    """One stem for an event's verb and noun: "launches"/"launch", "ships"/"ship", "goes live"/"go-live",
    "kicks off"/"kickoff", "starts"/"start"."""
    w = word.lower().replace("-", "").replace(" ", "")
    for verb, stem in (("goes", "go"), ("kicks", "kick")):
        if w.startswith(verb):
            return stem + w[len(verb):]
    if w.endswith("ing") and len(w) > 5:
        w = w[:-3]
        return w[:-1] if len(w) > 2 and w[-1] == w[-2] else w
    if re.search(r"(?:sh|ch|x|z|ss)es$", w):
        return w[:-2]
    return w[:-1] if w.endswith("s") and not w.endswith("ss") else w


def _when_key(when: str) -> tuple[str, str] | None:
    """What sort of day a date is and which: ("date", "21 dec"), ("weekday", "fri"), ("clock", ...);
    None for a habit ("on Mondays"). A year is left out: "December 14, 2025" is "December 14"."""
    date = _DATE_RE.search(when)
    if date:
        return "date", f"{int(date['d1'] or date['d2'])} {(date['m1'] or date['m2']).lower()[:3]}"
    low = when.lower()
    day = re.search(r"(mon|tues|wednes|thurs|fri|satur|sun)day(s?)", low)
    if day:
        return None if day[2] else ("weekday", day[1])
    return ("clock" if re.search(r"am|pm|:", low) else "ordinal"), re.sub(r"\s+|st|nd|rd|th", "", low)


def _event_dates(text: str) -> list[tuple[frozenset[str], str, tuple[str, str], str]]:
    """The events a text dates: (subject words, event stem, day, the date as written)."""
    out = []
    for sentence in _sentences(text):
        for s, e in _clause_spans(sentence):
            clause = _LEAD_IN.sub("", sentence[s:e].strip(), count=1)
            if _RECURRING.search(clause):
                continue
            for pattern in _EVENT_DATES:
                m = pattern.match(clause)
                key = _when_key(m["when"]) if m else None
                if key:
                    out.append((_thing_of(m["subj"]), _event_stem(m["ev"] + (m.groupdict().get("part") or "")),
                                key, m["when"].strip()))
    return out


def _event_date(a_text: str, b_text: str, a: Statement, b: Statement) -> str | None:
    """The same event of the same subject on two days, in its verb or its noun form on either side;
    not when one side denies it or only weighs it ("might be December 14")."""
    if a.negated or b.negated or _NOT_DONE.search(a_text) or _NOT_DONE.search(b_text):
        return None
    dates_b = _event_dates(b_text) if _WHEN_MENTION.search(a_text) else []
    for subj_a, ev_a, when_a, said_a in _event_dates(a_text) if dates_b else ():
        for subj_b, ev_b, when_b, said_b in dates_b:
            if (subj_a and subj_a == subj_b and ev_a == ev_b and when_a[0] == when_b[0]
                    and when_a[1] != when_b[1]):
                return f"different number or date for the same statement: {ev_a} {said_a} vs {said_b}"
    return None


# "Budget for paid ads in Q1 is 40k EUR" vs "Correction: Q1 paid ads budget is cut to 25k EUR after the
# finance review"; "My locker code is 4417" vs "My locker code changed to 9021": one side says a value
# of a thing changed, in other words than the statement it changes (whose shared words are too few
# for the same-statement rule). A change verb (or "is now") right before the new value.
_VALUE_CHANGE = re.compile(
    r"\b(?:chang(?:e|ed|es|ing)|cut|cuts|rais(?:e|ed|es)|increas(?:e|ed|es)|decreas(?:e|ed|es)|reduc(?:e|ed|es)|"
    r"lower(?:ed|s)?|bump(?:ed|s)?|updat(?:e|ed|es)|reset|set|drop(?:ped|s)?|revis(?:e|ed|es)|adjust(?:ed|s)?|"
    # a duration or a limit made shorter or longer, a setting moved, a secret rotated ("we shortened the
    # refund window to 14 days", "rotated the webhook secret to whsec-9051"); not the gerund, which is
    # mostly what is proposed ("proposed shortening the window to 14 days")
    r"shorten(?:ed|s)?|extend(?:ed|s)?|lengthen(?:ed|s)?|mov(?:e|ed|es)|rotat(?:e|ed|es)|"
    r"(?:went|goes|go)\s+(?:up|down)|grew|shrank|doubled|halved)\b"
    # what was changed, when it follows the verb ("we cut the ads budget to 25k"), with its qualifier
    # ("the ads budget for the launch campaign": five words cut that short and the change was missed)
    r"(?P<obj>(?:\s+(?!(?:to|at|from|by)\b)[\w'-]+){0,9}?)"
    # the old value or the difference ("from 40k EUR to 25k EUR", "by 15k to 25k")
    r"(?:\s+from\s+\S+(?:\s+[A-Za-z$\u20ac\u00a3%]{1,5})?)?(?:\s+by\s+\S+(?:\s+[A-Za-z$\u20ac\u00a3%]{1,5})?)?"
    r"\s+(?:to|at)\s+(?=\S*\d)"
    r"|\b(?:is|are)\s+now\s+(?=\S*\d)",
    re.I)
_NOT_THING = _NOT_SUBJECT | _STATE_WORDS | {"correction", "actually", "update", "note", "fyi", "new", "current",
                                            "currently", "officially", "again", "been", "get", "got", "gets"}
# A change someone only proposes, considers, decided against or saw refused changes nothing yet
# ("We decided against replacing Okta", "held off on migrating", "no plans to drop Sentry").
_NOT_DONE = re.compile(r"\b(?:rejected|declined|vetoed|proposed?|proposal|suggest(?:s|ed)?|might|maybe|could|would|"
                       r"let's|let\s+us|"
                       r"consider(?:s|ed|ing)?|if|whether|unless|"
                       # a plan or a wish to do something; not a noun before a value ("the Pro plan to 30 days")
                       r"(?:plan(?:s|ned)?|want(?:s|ed)?)\s+to(?=\s+[a-z])|"
                       r"decid(?:e|es|ed|ing)\s+against|h(?:o|e)ld(?:s|ing)?\s+off|no\s+plans?\s+to|won['\u2019]?t|"
                       r"will\s+not)\b", re.I)
_Y_TOKEN = re.compile(r"[a-z0-9$\u20ac\u00a3][\w.,:%$\u20ac\u00a3'-]*", re.I)
# Words that may stand between a thing and its value ("the budget for Q1 is 40k", "locker code: 4417").
_LINK_WORDS = frozenset({"is", "are", "was", "were", "be", "now", "currently", "still", "at", "of", "in", "for", "the",
                         "a", "an", "our", "my", "stays", "stay", "remains", "remain", "=", ":", "per", "on", "to"})


_YEAR = re.compile(r"^(?:19|20)\d\d$")
# A value of letters and digits ("tulip42", "PX-7781", "eu-west-1", "whsec-4412"): a password, a code,
# a region is as much a value as a number is, when it stands where the value does.
_IDENT_VALUE = re.compile(r"(?=[\w.-]*\d)(?=[\w.-]*[a-z])[a-z0-9][\w.-]*", re.I)
# What stands right before such a value: a copula ("the escalation code is PX-7781"), a colon or "=".
_VALUE_SLOT_WORDS = frozenset({"is", "are", "was", "were", "now", "currently", "still", "="})


def _value_of(y_text: str, thing: frozenset[str], shared_idents: frozenset[str],
              years: frozenset[str] = frozenset(), said: frozenset[str] = frozenset()) -> str | None:
    """The value ``y_text`` gives the thing: its words together (only joining words, or words the
    changing side ``said`` of it too, between them: "the default region for new projects"), then
    within a few joining words the first number ("Budget for paid ads in Q1 is 40k EUR" → 40k) or
    letters and digits after "is" ("... password is tulip42"). None when the value is far from the
    thing or other words come between: "the API timeout for the nightly batch jobs is 300 seconds" is
    another thing's timeout."""
    raw = _Y_TOKEN.findall(y_text.replace("\u2019", "'"))
    toks = [t.rstrip(".,:;") for t in raw]
    low = [t.lower() for t in toks]
    # a word of the thing as written here, or a compound of its words ("break-glass": the thing's words
    # come from a statement, which splits it)
    def parts(t: str) -> set[str]:
        whole = {t, _lemma(t)} & thing
        split = [w for w in t.split("-") if w] if "-" in t else []
        if split and all(w in thing or _lemma(w) in thing for w in split):
            return whole | {p for w in split for p in (w, _lemma(w))} & thing
        return whole

    forms = [parts(t) for t in low]
    where = [i for i in range(len(low)) if forms[i]]
    if not where or not thing <= set().union(*(forms[i] for i in where)):
        return None
    first, last = where[0], where[-1]
    joining = _LINK_WORDS | _DROP | shared_idents
    if any(low[i] not in joining and not forms[i] & thing and low[i] not in said for i in range(first, last)):
        return None
    for i in range(last + 1, min(last + 5, len(low))):
        t = low[i]
        if _YEAR.match(t):  # which year's: "the headcount plan for 2026 is 8" is not 2027's
            if years and t not in years:
                return None
            continue
        if _NUM.match(t.strip("$\u20ac\u00a3")) or (re.match(r"[$\u20ac\u00a3]?\d", t) and not re.search(r"[a-z]{2}", t)):
            if ":" in t or (i + 1 < len(low) and low[i + 1] in {"am", "pm"} | _MONTH_WORDS) or low[i - 1] in _MONTH_WORDS:
                return None  # a time or a date, not the thing's value
            return t.strip("$\u20ac\u00a3")
        # letters and digits where the value stands: after "is" or a colon, not after a preposition
        # ("the ads budget in Q1 is 40k": Q1 says which budget)
        if _IDENT_VALUE.fullmatch(t) and (low[i - 1] in _VALUE_SLOT_WORDS or raw[i - 1].endswith(":")):
            return t
        if t not in joining:
            return None
    return None


_MONTH_WORDS = frozenset(m.lower() for m in MONTH_NAMES) | {m.lower()[:3] for m in MONTH_NAMES}
# Who made a change is not the thing changed: "Finance lowered the hiring budget for the data team to
# 150k", "For the launch campaign, we cut the ads budget to 25k". The words right before the verb, back
# to a comma or the start, when they are only names, pronouns or "<word> team" (a lower-case word
# there is part of the thing or of a request: "Ana asked us to shorten ...", "Ana wants ... cut").
_AGENT = re.compile(r"(?:^|(?<=[,:;]))\s*(?:(?:the|our)\s+)?(?:(?-i:[A-Z][\w-]{0,40})|we|they|i|you|he|she|"
                    r"[a-z][\w-]{0,40}\s+team)(?:\s+(?:and|&)\s+(?-i:[A-Z][\w-]{0,40}))?"
                    r"(?:\s+(?:just|finally|already|also|officially|have|has|had|then))*\s*$", re.I)


# What is moved somewhere to be kept, not given a new value: "we moved the API key to vault-2".
_SECRET_WORDS = frozenset({"key", "token", "password", "secret", "credential", "cert", "certificate", "passphrase",
                           "keypair", "apikey", "pin"})


def _shape(name: str) -> str:
    """A name's letters and digits as classes: "db-3" and "db-7" are "a-0", "abc123" is "a0"."""
    return re.sub(r"[^\W\d_]+", "a", re.sub(r"\d+", "0", name.lower()))


def _changed_value(a_text: str, b_text: str, a: Statement, b: Statement) -> str | None:
    """One side says a thing's value changed ("… is cut to 25k", "we cut the ads budget to 25k", "…
    changed to 9021", "… is now 12") and the other gives the same thing another value: the thing is
    the changing side's words before the change and its object (at least two, the lead-in and who
    speaks left out); the other side must state a value of those words and no others
    (``_value_of``). A change only proposed or refused ("… was rejected") changes nothing."""
    if a.negated or b.negated:
        return None
    for x_text, y_text, x, y in ((a_text, b_text, a, b), (b_text, a_text, b, a)):
        rest = _LEAD_IN.sub("", x_text, count=1)
        change = _VALUE_CHANGE.search(rest)
        if change is None or _NOT_DONE.search(rest) or _PUT_OFF.search(rest):
            continue
        before = rest[:change.start()]
        if change["obj"] and change["obj"].strip():
            # with an object after the verb, the names or pronouns right before it say who changed it
            before = _AGENT.sub("", before, count=1)
        thing = frozenset((statement(before).core | statement(change["obj"] or "").core) - _NOT_THING)
        after = rest[change.end():]
        new = {n for n in statement(after).numbers if 0 <= after.lower().find(n) < 12}  # the value the change names
        first = _Y_TOKEN.match(after)
        moved_to = ""
        if first and _IDENT_VALUE.fullmatch(value := first.group(0).rstrip(".,:;").lower()) and not _NUM.match(value):
            if change.group(0).lower().startswith("mov"):
                moved_to = value
            new = {value}  # "is now orchid77", "changed to PX-9902" (not the 2 of "us-east-2")
        if len(thing) < 2 or not new:
            continue
        old = _value_of(y_text, thing, frozenset(x.idents & y.idents),
                        frozenset(t for t in re.findall(r"\d+", rest[:change.start()]) if _YEAR.match(t)),
                        frozenset(re.findall(r"[a-z0-9][\w'-]*", f"{before} {change['obj'] or ''}".lower())))
        if old is None or old in new:
            continue
        # Moved "to vault-2" is most often moved to a place ("the API key is abc123" is not its
        # vault); moved to a name of the old value's shape is its new value ("the primary database
        # host is db-3" / "... moved to db-7", "us-east-1" / "eu-west-1").
        if moved_to and (_shape(moved_to) != _shape(old) or thing & _SECRET_WORDS):
            continue
        said = re.sub(r"(?:\s+(?:is|are|was|were|has|have|had|been|be|got|gets|just|now))+\s*$", "",
                      rest[:change.start()].strip(), flags=re.I)
        if change["obj"] and change["obj"].strip():
            said = change["obj"].strip()
        return f"changed value: {said} {old} vs {', '.join(sorted(new))}"
    return None


# Where a value stands after the thing it is of: a copula, a verb of pricing or of changing, "at", "to",
# "from <the old value> to" ("the Pro plan goes from $29 to $35"), "per <unit>" of the old value.
_SLOT_WORDS = frozenset(_LINK_WORDS | {"cost", "costs", "priced", "go", "goes", "went", "gone", "move", "moves", "moved",
                                       "change", "changes", "changed", "raise", "raises", "raised", "rose", "rises",
                                       "cut", "lower", "lowers", "lowered", "increase", "increased", "reduce",
                                       "reduced", "set", "bump", "bumped", "drop", "dropped", "up", "down", "will",
                                       "by", "flat", "just", "officially", "stay"}) - {"the", "a", "an", "our", "my",
                                                                                        "of", "for", "in", "on"}
# Where the words of a thing begin: "the Pro plan", "our Team plan"; "price of the Pro plan" reads on.
_DETERMINERS = frozenset({"the", "a", "an", "our", "their", "its", "this", "that", "my", "your", "his", "her"})
# The value's own name is no word of the thing: "the price of the Pro plan" is the Pro plan's value.
_VALUE_WORDS = frozenset({"price", "pricing", "cost", "fee", "rate", "value", "amount"})
_PHRASE_TOKEN = re.compile(r"[$\u20ac\u00a3]?[\w'-]+(?:[.,]\d+)*%?|[,;:!?()]")
_AMOUNT_RE = re.compile(_AMOUNT, re.I)
_PER_RE = re.compile(_PER, re.I)


def _amount(tok: str) -> tuple[str, str]:
    """A value as (currency, number): "$1,000" → ("$", "1000"), "25K" → ("", "25k")."""
    cur = tok[0] if tok[:1] in "$\u20ac\u00a3" else ""
    return cur, re.sub(r",(?=\d{3}\b)", "", tok[len(cur):].lower())


def _per(text: str) -> frozenset[str]:
    """The units of a value written right after it: " per seat per month" → seat, month."""
    return frozenset(re.findall(r"(?:per|a|an|each|every)\s+([a-z][\w-]*)", text.lower()))


def _thing_before(text: str, pos: int) -> tuple[frozenset[str], str]:
    """The thing a value at ``pos`` is the value of, and its words as written: the words right before it,
    past its slot ("is", "costs", "at", "goes from $29 to"), back to a determiner, a punctuation mark or
    five words ("the Pro plan is $35" → pro, plan; "finance wants the Pro plan at $39" → pro, plan). A
    phrase "the price of"/"for" before the determiner reads on: "the discount for the Pro plan" is
    another thing. Empty for a value right after "from" (the old value of a change), after "not" or
    with no words before its slot."""
    toks = _PHRASE_TOKEN.findall(text[max(0, pos - 200):pos])
    i = len(toks) - 1
    if i >= 0 and toks[i].lower() in {"from", "not", "no", "never"}:
        return frozenset(), ""
    slot = 0
    while i >= 0 and slot < 6:
        t = toks[i].lower()
        if t in _SLOT_WORDS or t == ":":
            i, slot = i - 1, slot + 1
        elif i > 0 and toks[i - 1].lower() == "from" and _AMOUNT_RE.fullmatch(t):
            i, slot = i - 2, slot + 2
        else:
            break
    words: list[str] = []
    while i >= 0 and len(words) < 8:
        t = toks[i].lower()
        if not re.match(r"[a-z]", t) or t in _NEG or t == "not":
            break
        if t in _DETERMINERS:
            if i > 0 and toks[i - 1].lower() in {"of", "for"} and len(words) < 5:
                words.append(toks[i - 1])
                i -= 2
                continue
            break
        words.append(toks[i])
        i -= 1
        if len(words) >= 5 and not (i >= 0 and toks[i].lower() in _DETERMINERS):
            return frozenset(), ""  # no determiner in sight: a sentence, not a thing
    said = " ".join(reversed(words))
    return frozenset(_lemma(w.lower()) for w in words) - _VALUE_WORDS - _DROP - {"of", "for"}, said


# What a verb's value completes: "JWT access tokens that expire after | 15 minutes", "JWT access tokens now
# expire after | 60 minutes". Words between its subject and its verb that name nothing ...
_SLOT_SKIP = frozenset({"that", "which", "who", "now", "still", "currently", "also", "will", "shall", "always", "only",
                        "just", "then", "already", "officially", "instead", "is", "are", "be", "do", "does"})
# ... the preposition the verb takes before its value ...
_SLOT_PREPS = frozenset({"after", "within", "every", "in", "at", "to", "for", "by", "under", "over", "below", "above"})
# ... and where its subject begins: a determiner, a preposition, a conjunction or a pronoun before it.
_SLOT_STOP = _DETERMINERS | {"with", "for", "of", "in", "on", "at", "to", "by", "from", "via", "about", "into", "and",
                             "or", "but", "so", "because", "when", "if", "while", "than", "as", "we", "i", "they",
                             "you", "he", "she", "it"}


def _slot_before(text: str, pos: int) -> tuple[frozenset[str], str]:
    """The subject, verb and preposition a value at ``pos`` completes, and its words as written, back to
    a determiner, a preposition, a conjunction, a pronoun or a punctuation mark: "the public API
    authenticates with JWT access tokens that expire after 15 minutes" and "Decision changed: JWT access
    tokens now expire after 60 minutes" → jwt, access, token, expire, after (a relative "that" or a "now"
    between names nothing). ``_thing_before`` reads a noun phrase back to its determiner; this reads a
    clause's subject and verb, whose subject has none. Empty after "from" or "not" (an old value or one
    given up), or with no start in sight (a sentence, not a slot)."""
    toks = _PHRASE_TOKEN.findall(text[max(0, pos - 200):pos])
    i = len(toks) - 1
    if i < 0 or toks[i].lower() in {"from", "not", "no", "never"}:
        return frozenset(), ""
    first = i
    words: list[str] = []
    if toks[i].lower() in _SLOT_PREPS:
        words.append(toks[i].lower())
        i -= 1
    while i >= 0:
        t = toks[i].lower()
        if t in _SLOT_SKIP:  # (a relative "that" before any determiner's)
            i -= 1
            continue
        if not re.match(r"[a-z]", t) or t in _NEG or t in _SLOT_STOP:
            break
        words.append(t)
        if len(words) > 8:
            return frozenset(), ""
        i -= 1
    return frozenset(w if w in _SLOT_PREPS else _lemma(w) for w in words if w in _SLOT_PREPS or w not in _DROP), \
        " ".join(toks[i + 1:first + 1])


def _contrasted_value(a_text: str, b_text: str, a: Statement, b: Statement) -> str | None:
    """One side gives a thing a value and, after ", not", the value it gives up ("finance wants the Pro
    plan at $39 per seat, not $35"); the other gives the same thing (the same words before the value,
    two at least) the value given up ("The Pro plan is $35 per seat", "the Pro plan goes from $29 to
    $35 per seat"). The contrast is what makes it a change: a wish without it ("finance wants the Pro
    plan at $39") names no old value, and a proposal ("proposed ...", "might ...") changes nothing.
    Units written on both sides must agree ("per seat" vs "per year" are two prices): those after the
    value given up, or else after the new one; so must a unit right after it ("after 60 minutes, not 15
    minutes" gives up 15 minutes, not 15 days). The thing may also be the subject and verb the value
    completes (``_slot_before``), where the contrast reads as no noun phrase: "JWT access tokens now
    expire after 60 minutes, not 15" against "... authenticates with JWT access tokens that expire after
    15 minutes"."""
    if a.negated or b.negated:
        return None
    for x_text, y_text in ((a_text, b_text), (b_text, a_text)):
        if _NOT_DONE.search(x_text) or _PUT_OFF.search(x_text):
            continue
        for m in islice(_VALUE_CONTRAST.finditer(x_text), 4):
            new, old = _amount(m["new"]), _amount(m["old"])
            if new[1] == old[1] or (new[0] and old[0] and new[0] != old[0]):
                continue
            thing, said = _thing_before(x_text, m.start("new"))
            # (a clause's subject and verb where no noun phrase is read: "the Pro plan at $39" is the plan's)
            slot, slot_said = _slot_before(x_text, m.start("new")) if len(thing) < 2 else (frozenset(), "")
            if len(thing) < 2 and len(slot - _SLOT_PREPS) < 2:
                continue
            # the units of the value given up: its own, or else the new value's ("$39 per seat, not $35")
            units = _per(m["old_per"]) or _per(m["new_per"])
            unit = _lemma((m["old_unit"] or m["new_unit"]).strip().lower())
            for v in islice((v for v in _AMOUNT_RE.finditer(y_text) if _amount(v.group(0))[1] == old[1]), 4):
                cur = _amount(v.group(0))[0]
                if cur and (new[0] or old[0]) and cur != (old[0] or new[0]):
                    continue
                per = _per(_PER_RE.match(y_text, v.end()).group(0))
                if units and per and not (units <= per or per <= units):
                    continue
                y_unit = re.match(r"\s+([a-z][a-z-]*)", y_text[v.end():v.end() + 40], re.I)
                if unit and (y_unit is None or _lemma(y_unit[1].lower()) != unit):
                    continue
                if len(thing) >= 2 and _thing_before(y_text, v.start())[0] == thing:
                    return f"changed value: {said} {m['old']} vs {m['new']}"
                if len(slot - _SLOT_PREPS) >= 2 and _slot_before(y_text, v.start())[0] == slot:
                    return f"changed value: {slot_said} {m['old']} vs {m['new']}"
    return None


# "The payment webhook retries 5 times with exponential backoff" vs "The payment webhook now retries 8
# times": one statement up to its value and unit, the other adding how after it, which pushed the pair
# under the same-statement rule's overlap. A number with the word after it as its unit ...
_UNIT_VALUE = re.compile(r"(?<![\w.,$\u20ac\u00a3-])(?P<n>\d{1,9}(?:[.,]\d{1,3})?)\s+(?P<unit>[a-z][a-z-]{1,30})(?![\w-])",
                         re.I)
# ... not a month, a clock's or a joining word
_NOT_UNIT = _MONTH_WORDS | _EMPTY | {"am", "pm"}
# ... and what follows it that says how, not for what or when ("for card declines", "a day", "within an
# hour" narrow the value to another case).
_MANNER = re.compile(r"\s*(?:with|using|via)\b", re.I)
# ... after a count of times or a duration only: after things counted, "with" says which ones ("3 nodes
# with GPUs", "5 seats with admin rights" are other things than "5 nodes", "20 seats").
_MANNER_UNITS = frozenset({"time", "attempt", "retry", "try", "millisecond", "ms", "second", "sec", "minute",
                           "min", "hour", "day", "week", "month", "year"})
_MAX_UNIT_VALUES = 4


@dataclass(frozen=True)
class _UnitValue:
    """A number with its unit in a clause: the words before it, and after it to the clause's end."""
    before: frozenset[str]
    said: str
    number: str
    unit: str
    unit_said: str
    after: frozenset[str]
    manner: bool  # what follows opens with "with", "using", "via"


def _value_words(text: str) -> frozenset[str]:
    return frozenset(_lemma(t) for t in re.findall(r"[a-z0-9][a-z0-9'-]*", text.lower())
                     if t not in _DROP and t not in _SLOT_SKIP)


def _unit_values(text: str) -> list[_UnitValue]:
    """The first few numbers with a unit in the text's clauses; a number naming the referent ("run
    1224") is none."""
    out: list[_UnitValue] = []
    blanked = _identifiers(text)[0]
    clauses = (sentence[s:e] for sentence in _sentences(blanked) for s, e in _clause_spans(sentence))
    for clause in islice(clauses, _MAX_CLAUSES):
        clause = _LEAD_IN.sub("", clause.strip(), count=1)
        for m in _UNIT_VALUE.finditer(clause):
            unit = m["unit"].lower()
            if unit in _NOT_UNIT:
                continue
            rest = clause[m.end():]
            # (a bound is no word of the thing: "retries up to 8 times")
            before = re.sub(r"\bup\s+to\s*$", "", clause[:m.start()], flags=re.I)
            out.append(_UnitValue(_value_words(before), clause[:m.start()].strip(), m["n"], _lemma(unit),
                                  m["unit"], _value_words(rest),
                                  _lemma(unit) in _MANNER_UNITS and bool(_MANNER.match(rest))))
            if len(out) >= _MAX_UNIT_VALUES:
                return out
    return out


def _value_with_detail(a_text: str, b_text: str, a: Statement, b: Statement) -> str | None:
    """The same words before a number and the same unit after it, the numbers differing, one side
    adding how after the unit (the other's words after it, if any, among them) ("... retries 5 times with exponential backoff" vs "... now retries 8
    times"; a "now" or "still" before it is no word of it). Not a scope or a rate after it ("8 times
    for card declines", "8 times a day"), which may be another case's value, nor another "how" on
    each side; not a denial, nor a change only proposed or put off."""
    if a.negated or b.negated or not (_UNIT_VALUE.search(a_text) and _UNIT_VALUE.search(b_text)):
        return None
    if any(_NOT_DONE.search(t) or _PUT_OFF.search(t) for t in (a_text, b_text)):
        return None
    # (the clauses are read only when a unit on both sides has two numbers: most pairs have none)
    said_a, said_b = (frozenset((_lemma(m["unit"].lower()), m["n"]) for m in islice(_UNIT_VALUE.finditer(t), 16))
                      for t in (a_text, b_text))
    if not any(u == v and n != k for u, n in said_a for v, k in said_b):
        return None
    values_b = _unit_values(b_text)
    for x in _unit_values(a_text) if values_b else ():
        if len(x.before - _EMPTY) < 2:
            continue
        for y in values_b:
            if x.unit != y.unit or x.number == y.number or x.before != y.before:
                continue
            # (the same words after both: the same-statement rule's)
            short, long = sorted((x, y), key=lambda v: len(v.after))
            if short.after < long.after and long.manner:
                return (f"different number or date for the same statement: {x.said} {x.number} {x.unit_said} vs "
                        f"{y.number} {y.unit_said}")
    return None


# "We're dropping PostgreSQL for the ledger and going with CockroachDB instead", "switched the event bus
# from Kafka to NATS", "replaced Okta with Auth0", "GCP rather than AWS", "Pulumi from now on, not
# Terraform", "LaunchDarkly is gone", "Dev took over the roadmap from Chen": one side names the value it
# gives up (a name: capitalised, or letters and digits, ``_OLD``), which the other states.
# "From X to Y" gives X up only after a verb of changing: without one it is a flow, a copy or a trip
# ("streams events from Kafka to Snowflake", "replicated from Frankfurt to Dublin", "the flight from
# Berlin to Lisbon").
_CHANGE_VERB = (r"switch(?:es|ed|ing)?|migrat(?:e|es|ed|ing|ion)|mov(?:e|es|ed|ing)|chang(?:e|es|ed|ing)|"
                r"shift(?:s|ed|ing)?|port(?:s|ed|ing)?|transition(?:s|ed|ing)?|relocat(?:e|es|ed|ing)|"
                r"go|goes|going|went|gone|upgrad(?:e|es|ed|ing)|downgrad(?:e|es|ed|ing)")
# (the name given up may carry its version: "switched billing from PostgreSQL 16 to MySQL 8")
_FROM_TO = re.compile(rf"(?i:\b(?:{_CHANGE_VERB})\b(?:\s+(?!from\b)[\w'.-]+){{0,6}}?\s+from)\s+{_OLD}"
                      r"(?:\s+v?\d+(?:\.\d+)*)?\s+(?i:to|onto)\b")
_GIVES_UP = (_FROM_TO, *(re.compile(p) for p in (
    r"(?i:\b(?:replac(?:e|ed|es|ing)|swap(?:s|ped|ping)?|ditch(?:es|ed|ing)?|drop(?:s|ped|ping)?|abandon(?:s|ed|ing)?|"
    rf"retir(?:e|es|ed|ing)|deprecat(?:e|es|ed|ing)|sunset(?:s|ting)?|get(?:ting)?\s+rid\s+of|got\s+rid\s+of))\s+{_OLD}",
    rf"(?i:\b(?:instead\s+of|rather\s+than|in\s+place\s+of))\s+{_OLD}",
    _CONTRAST.pattern,
    rf"(?i:\b(?:mov|migrat|switch)\w*\b[^.;]{{0,200}}?\b(?:off|away\s+from))\s+{_OLD}",
    rf"{_OLD}\s+(?i:is|are|was|were|has\s+been|have\s+been)\s+(?i:gone|retired|deprecated|dropped|removed|replaced)\b",
    rf"(?i:\b(?:took|take|takes|taking|taken)\s+over\b[^.;]{{0,200}}?\bfrom)\s+{_OLD}",
)))
# A flow that runs again and again ("moves old logs from Elasticsearch to S3 every night") changes nothing.
_RECURRING_FLOW = re.compile(r"\b(?:nightly|hourly|daily|weekly|monthly|continuously|every|each)\b", re.I)
# A version after the name is part of it: "We dropped Safari 14" gives up Safari 14, not Safari 15.
_NAME_VERSION = re.compile(r"\s+v?(\d+(?:\.\d+)*)\b(?!\.\d)")
# What may follow a name given up: a preposition, a conjunction, a verb, a time word. Any other
# lower-case word is a noun the name only qualifies: "replaced the SSL certificate", "dropped the
# Postgres index", "retired the Jenkins agents" give up a part of the thing, not the thing.
_AFTER_NAME_OK = frozenset({
    "to", "onto", "into", "for", "with", "by", "via", "in", "on", "at", "from", "as", "of", "off", "out", "over",
    "across", "through", "and", "or", "but", "nor", "so", "because", "since", "after", "before", "until", "once",
    "last", "this", "next", "yesterday", "today", "tonight", "tomorrow", "now", "too", "already", "altogether",
    "everywhere", "instead", "earlier", "later", "soon", "again", "then", "when", "while", "where", "which", "that",
    "is", "are", "was", "were", "has", "have", "had", "will", "would", "the", "a", "an", "our", "their", "its", "we",
    "they", "it", "in favor", "in favour"})
# Nouns too general to say two statements speak of one thing: "the mobile team" and "the web team".
_GENERIC = frozenset({"team", "people", "person", "folk", "group", "thing", "stuff", "everyone", "everybody",
                      "company", "org", "side", "lot", "one", "way", "guy", "someone", "anyone"})
# Words of the giving up, not of the thing given up or kept.
_GIVE_UP_WORDS = frozenset({"drop", "dropping", "dropped", "replace", "replaced", "replacing", "switch", "switched",
                            "switching", "migrate", "migrating", "go", "going", "gone", "instead", "rather", "than",
                            "place", "off", "onto", "away", "new", "old", "take", "took", "taken", "taking", "over",
                            "ditch", "ditched", "swap", "swapped", "retired", "deprecated", "removed", "re", "ll",
                            "ve", "s", "d", "m", "t", "with", "as", "by", "via", "through"})
# ... and a change put off is not made yet. Not in _NOT_DONE: a date postponed is a date moved.
_PUT_OFF = re.compile(r"\b(?:postpon(?:e|ed|es|ing)|put\s+off|defer(?:s|red|ring)?)\b", re.I)


def _given_up(text: str) -> set[tuple[str, str]]:
    """The names the text gives up, each with the version written after it ("" when none)."""
    out: set[tuple[str, str]] = set()
    for p in _GIVES_UP:
        for m in p.finditer(text):
            if p is _FROM_TO and _RECURRING_FLOW.search(text):
                continue
            # a name's own dots stay ("Node.js", "v2.1"); a sentence's full stop after it does not
            name, after = m["x"].rstrip(".-"), text[m.start("x") + len(m["x"].rstrip(".-")):]
            version = _NAME_VERSION.match(after)
            if version:
                after = after[version.end():]
            noun = re.match(r"(?:['\u2019]s\b|\s+(?P<w>[a-z][\w'-]*))", after)
            if noun and (noun["w"] is None or (noun["w"] not in _AFTER_NAME_OK and not noun["w"].endswith("ly"))):
                continue
            if name.lower() not in _DAY_WORDS | _MONTH_WORDS:
                out.add((name.lower(), version[1] if version else ""))
    return out


def _thing_words(text: str) -> frozenset[str]:
    """The words that say what a statement is about, without its verbs of being, using or changing."""
    words = (_lemma(t) for t in re.findall(r"[a-z0-9]+(?:[.-][a-z0-9]+)*", text.lower()))
    return frozenset(w for w in words if w not in _EMPTY and w not in _STATE_WORDS and w not in _DROP
                     and w not in _NEG and w not in _NOT_SUBJECT and w not in _GIVE_UP_WORDS and w not in _DAY_WORDS)


def _qualified(text: str, name: str) -> str:
    """The noun a name qualifies in the text ("the Kafka upgrade" → upgrade), "" when none. Not a verb
    of running or using after it: "Our CI runs on GitHub Actions" says what CI runs on."""
    m = re.search(rf"(?<![\w-]){re.escape(name)}\s+([a-z][\w'-]*)", text, re.I)
    if (m is None or not m[1][0].islower() or m[1] in _AFTER_NAME_OK or m[1].endswith("ly")
            or _lemma(m[1]) in _STATE_WORDS):
        return ""
    return _lemma(m[1])


def _other_names(x_text: str, y_text: str, x: Statement, y: Statement) -> frozenset[str]:
    """The names two statements share that are no word of what both speak of: a name each uses for
    another thing ("the Kafka upgrade" vs "the Kafka cluster"). A capital that only opens a sentence
    is no name ("Infrastructure is managed with ..."), and a name of the same thing on both sides
    ("for the CLI" vs "The CLI runs on ...") stays a shared word."""
    out = set()
    for name in x.places & y.places:
        heads = {_qualified(x_text, name), _qualified(y_text, name)}
        if "" not in heads and len(heads) == 2:
            out.add(name)
    return frozenset(out)


def _naming_clauses(text: str, name: str) -> str:
    """The clauses of the text that name ``name``: what it says of the thing that uses it ("Our CI runs on
    Jenkins; the docs build uses GitHub Actions" says GitHub Actions of the docs build, not of CI)."""
    said = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])", re.I)
    clauses = (sentence[s:e] for sentence in _sentences(text) for s, e in _clause_spans(sentence))
    return " ".join(c for c in islice(clauses, _MAX_CLAUSES) if said.search(c))


def _names_as_written(x_text: str, y_text: str, name: str) -> bool:
    """Whether ``y_text`` writes the name as ``x_text`` does, a capital or a digit in it: a name with no
    entity list to say so ("Our CI runs on GitHub Actions" names GitHub Actions as the switch does)."""
    for m in re.finditer(rf"(?<![\w-]){re.escape(name)}(?![\w-])", x_text, re.I):
        written = m.group(0)
        if re.search(r"[A-Z0-9]", written) and re.search(rf"(?<![\w-]){re.escape(written)}(?![\w-])", y_text):
            return True
    return False


def _gave_up(a_text: str, b_text: str, a: Statement, b: Statement) -> str | None:
    """One side gives up a value the other states, of a thing both name ("... dropping PostgreSQL for
    the ledger ..." vs "For the new ledger database we'll go with PostgreSQL 15"): a word beside the
    name is shared (the ledger, the event bus, the admin console) — not a name each uses of another
    thing ("the Kafka upgrade" vs "the Kafka cluster") nor a generic noun ("team"). The shared word is
    one of what the other side says uses the name (its clauses naming it: "the docs build uses GitHub
    Actions" is not what "switched the CI runner from GitHub Actions" changes), and no word of the name
    itself ("Actions" shared no subject of "Our CI runs on GitHub Actions" and "switched the docs hosting
    from GitHub Actions"). The name is one of the other side's entities, or written there as here with
    a capital or a digit (no entity list given). Not when both
    give it up, nor when the giving up is only proposed, weighed, decided against or put off, nor
    when the other side denies it."""
    for x_text, y_text, x, y in ((a_text, b_text, a, b), (b_text, a_text, b, a)):
        if x.negated or y.negated or _NOT_DONE.search(x_text) or _PUT_OFF.search(x_text):
            continue
        y_low = y_text.lower()
        y_gives_up = {w for name, _ in _given_up(y_text) for w in name.split()}
        # (lemmas, as _thing_words gives the words: the name "actions" is the word "action")
        names = {w for n in _other_names(x_text, y_text, x, y) for w in (n, _lemma(n))}
        for old, version in sorted(_given_up(x_text)):
            # a name the other side states (one of its entities, letters and digits, or written as here),
            # and does not give up
            named = (set(old.split()) <= y.places or (re.search(r"\d", old) and old in y.idents)
                     or _names_as_written(x_text, y_text, old))
            if not named or set(old.split()) & y_gives_up:
                continue
            # ... as written, with the same version when one is given up
            said = re.escape(old) + (rf"\s+v?{re.escape(version)}(?!\w|\.\d)" if version else r"(?![\w-])")
            if not re.search(rf"(?<![\w-]){said}", y_low):
                continue
            own = {w for n in old.split() for w in (n, _lemma(n))} | {version}
            if (_thing_words(x_text) & _thing_words(_naming_clauses(y_text, old))) - own - names - _GENERIC:
                return f"replaced: the other statement gives up {' '.join((old, version)).strip()}"
    return None


# "The design review is on Friday" vs "The design review was cancelled": an event one side dates and
# the other calls off. Passive ("was cancelled", "is called off", a headline's "Design review
# cancelled") or active ("we cancelled the design review"); the thing called off is the words before
# the passive or after the active verb.
_CALLED_OFF = r"(?:cancell?ed|called\s+off|scrapped)"
_CANCEL_PASSIVE = re.compile(rf"(?:\b(?:is|was|were|are|has\s+been|have\s+been|got|gets|been|be)\s+)?(?:now\s+)?"
                             rf"(?:officially\s+)?\b{_CALLED_OFF}\b", re.I)
_CANCEL_WORD = re.compile(r"\b(?:cancel|call(?:s|ed)?\s+off|scrap)", re.I)
# A calling off not done: only near, ahead or needed ("was almost cancelled", "I'll cancel", "we need to
# cancel").
_CANCEL_NOT_DONE = re.compile(r"\b(?:almost|nearly|will|shall|should|must|need(?:s|ed)?\s+to|going\s+to|have\s+to|"
                              r"has\s+to|had\s+to|want(?:s|ed)?\s+to)\b|'ll\b", re.I)
# A dated side that recurs: one occurrence called off leaves the schedule ("Monday's standup is
# cancelled" against "the standup is on Mondays at 10").
_SCHEDULE = re.compile(r"\b(?:every|each|weekly|daily|monthly|biweekly|fortnightly)\b|"
                        r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days\b", re.I)
_CANCEL_ACTIVE = re.compile(r"\b(?:cancel(?:s|led|ed)?|call(?:s|ed)?\s+off|scrap(?:s|ped)?)\s+(?P<obj>.+)$", re.I)
_CANCEL_WORDS = frozenset({"cancel", "cancels", "cancelled", "canceled", "call", "calls", "called", "off", "scrap",
                           "scraps", "scrapped", "officially", "got", "gets"})


def _days_named(text: str) -> frozenset[str]:
    """The days and times a text names, written alike: "March 3" and "3rd of March" are "3 mar",
    "Friday" "friday", "9:30" "9:30"."""
    out = set(re.findall(r"\b\d{1,2}:\d\d\b|\b\d{1,2}\s*(?:am|pm)\b", text.lower()))
    for m in _DATE_RE.finditer(text):
        out.add(f"{int(m['d1'] or m['d2'])} {(m['m1'] or m['m2']).lower()[:3]}")
    out |= {w for w in re.findall(r"[a-z]+", text.lower()) if w.rstrip("s") in _WEEKDAYS}
    return frozenset(w.rstrip("s") if w.rstrip("s") in _WEEKDAYS else w for w in out)


def _called_off(text: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """What the text calls off (its words) and the days it names, or None."""
    if not _CANCEL_WORD.search(text):
        return None  # most texts: no sentence scans (the reason pattern is slow on long runs of spaces)
    # each clause apart: "Standup at 9:30 is cancelled; it's at 10:00 now" calls off the 9:30 one only
    clauses = (sentence[s:e] for sentence in _sentences(text) for s, e in _clause_spans(sentence))
    for part in islice(clauses, _MAX_CLAUSES):
        if not _CANCEL_WORD.search(part):
            continue
        clause = _REASON.sub("", _LEAD_IN.sub("", part, count=1), count=1).strip().rstrip(".!")
        passive = _CANCEL_PASSIVE.search(clause)
        active = _CANCEL_ACTIVE.search(clause)
        if passive and not clause[passive.end():].strip(" ,;:-—"):
            words = clause[:passive.start()]
        elif active and (passive is None or not re.search(r"\b(?:is|was|were|are|been|be|got|gets)\s*$",
                                                          clause[:passive.start()], re.I)):
            words = active["obj"]
        elif passive:
            words = clause[:passive.start()]
        else:
            continue
        days = _days_named(clause)
        words = re.sub(r"'s?\b|\u2019s?\b", "", words)  # "Friday's design review" is the Friday one
        thing = statement(words).core - _NOT_SUBJECT - _WHEN_WORDS - _DAY_WORDS - _MONTH_SHORT - _CANCEL_WORDS
        return (thing, days) if thing else None
    return None


def _cancelled(a_text: str, b_text: str, a: Statement, b: Statement) -> str | None:
    """One side calls off what the other gives a day ("the design review is on Friday" vs "the
    design review was cancelled"): the same thing (one side's words within the other's), and not
    another day's ("the March 3 review was cancelled" leaves the one on March 10). Not when the calling
    off is denied, proposed or weighed ("we might cancel ..."), nor when both call it off."""
    offs = {a_text: _called_off(a_text), b_text: _called_off(b_text)}  # each text read once
    for x_text, y_text, x in ((a_text, b_text, a), (b_text, a_text, b)):
        off = offs[x_text]
        if off is None or offs[y_text] is not None or x.negated or _NOT_DONE.search(x_text):
            continue
        if _CANCEL_NOT_DONE.search(x_text):
            continue
        thing, days = off
        for dated in (_dated(y_text[s:e]) for spans in _date_clause_spans(y_text) for s, e in spans):
            if dated.st.negated or not dated.is_day or not dated.what or _SCHEDULE.search(dated.text):
                continue
            # what is called off is the whole event, not a part of it ("the launch party", "the design
            # review room booking", "my invite to the design review")
            if not thing <= dated.what:
                continue
            # (the day it gives, not one it gives up: "is at 10:00, not 9:30" is at 10:00)
            if days and not days & _days_named(_WHEN_CONTRAST.sub(lambda m: m["new"], dated.text)):
                continue
            return f"called off: {', '.join(_when_words(dated.text, dated.st))} vs cancelled"
    return None


# A state and its opposite: "the office is closed on Friday" vs "... open on Friday", "the feature
# flag is enabled" vs "... disabled". Transient status words (green/red, passing/failing, up/down) are
# not here: two days' statuses are two days' reports, not one statement contradicted.
_OPPOSITES = {frozenset(p) for p in (
    ("open", "closed"), ("enabled", "disabled"), ("on", "off"),
    ("allowed", "forbidden"), ("allowed", "prohibited"), ("allowed", "banned"), ("permitted", "forbidden"),
    ("required", "optional"), ("mandatory", "optional"), ("public", "private"), ("active", "inactive"),
    ("available", "unavailable"), ("supported", "unsupported"), ("included", "excluded"),
    ("approved", "rejected"), ("accepted", "rejected"), ("accepted", "declined"), ("locked", "unlocked"),
    ("visible", "hidden"), ("remote", "onsite"), ("remote", "in-person"), ("paid", "unpaid"),
    ("synchronous", "asynchronous"), ("sync", "async"), ("free", "paid"), ("internal", "external"),
)}
# Words that do not change what is stated of the thing: "now", "still", the copula.
_STATE_FILLER = frozenset({"now", "currently", "still", "again", "is", "are", "was", "were", "be", "been", "being",
                           "has", "have", "the", "a", "an", "officially", "actually", "will", "remain", "remains",
                           "stay", "stays", "become", "becomes", "became", "made", "set", "to"})


_STATED_AS = (r"\b(?:is|are|was|were|be|been|being|stays?|remains?|becomes?|became|'s|'re|turned|set\s+to|made)"
              r"\s+(?:(?:now|still|officially|actually|currently|again)\s+)*{w}\b")
_RELATIVE_DAY = re.compile(r"\b(?:today|tonight|tomorrow|yesterday|right\s+now|at\s+the\s+moment|this\s+"
                           r"(?:morning|afternoon|evening|week|weekend))\b", re.I)
_CONDITION = re.compile(r"\b(?:if|when|whenever|unless|once|while|until)\b", re.I)
_PRONOUNS = frozenset({"it", "its", "this", "that", "they", "them", "these", "those", "we", "i", "you", "he", "she"})


def _opposite_state(a_text: str, b_text: str) -> str | None:
    """The same statement with one word turned to its opposite, and nothing else changed; not a
    condition ("if the flag is enabled, ...": what follows from each state)."""
    if _CONDITION.search(a_text) or _CONDITION.search(b_text):
        return None

    def words(text: str) -> list[str]:
        low = re.sub(r"'(?:s|re|ll|ve|d|m)\b", "", text.lower().replace("’", "'"))  # "it's" is "it"
        return [w for w in re.findall(r"[a-z][a-z'-]*|\d[\w.:-]*", low) if w not in _STATE_FILLER]

    wa, wb = words(a_text), words(b_text)
    only_a, only_b = set(wa) - set(wb), set(wb) - set(wa)
    if len(only_a) != 1 or len(only_b) != 1 or not (set(wa) & set(wb)) - _PRONOUNS:
        return None
    x, y = next(iter(only_a)), next(iter(only_b))
    if frozenset((x, y)) not in _OPPOSITES:
        return None
    # said of the thing ("the repo is private"), not naming it ("private repos are on GitHub" and
    # "public repos are on GitHub" are two things)
    if not (re.search(_STATED_AS.format(w=re.escape(x)), a_text, re.I)
            and re.search(_STATED_AS.format(w=re.escape(y)), b_text, re.I)):
        return None
    # "the office is closed today" and, another day, "... open today": each day's state
    if _RELATIVE_DAY.search(a_text) or _RELATIVE_DAY.search(b_text):
        return None
    # the same words in the same order but the one: "open" of one thing and "closed" of another is not it
    if [w for w in wa if w != x] != [w for w in wb if w != y]:
        return None
    return f"opposite state for the same statement: {x} vs {y}"


# A role one holds at a time: "Tom is the tech lead for the mobile app" and "Rachel is the tech lead
# for the mobile app" contradict each other; "Kenji is out sick today" and "Maria is out sick today" do
# not. The role must be what the statement says of the people it opens with — "<actors> (is|will be)
# (now) (the) <role>", "<actors> owns ..." — not a word anywhere in it: "the lead-scoring refactor", "the
# on-call runbook", "the contact form" are things two people work on, not roles they hold. (The form
# "<role> is <name>", "On-call this week is Kenji", opens with no actor: its names are one thing's values.)
_ROLE_NOUN = (r"(?:owners?|lead|leads|manager|head|point\s+of\s+contact|contact|dri|on[\s-]?call|captain|approver|"
              r"maintainer|sponsor|assignee|in\s+charge|responsible|accountable|(?:re)?assigned)")
_ROLE_VERB = r"(?:owns?|leads?|manages?|heads?|maintains?)"
# "is the first to finish", "is the fastest reviewer": a ranking, not a post.
_RANKED = (r"(?:first|second|third|fourth|fifth|last|best|worst|most|least|top|\d+(?:st|nd|rd|th)|fastest|quickest|"
           r"youngest|oldest|newest|latest|earliest|biggest|largest|highest|lowest|smallest|strongest|greatest|"
           r"closest|nearest|longest|shortest)")
# (matched where the actors end: no "^", which would only match at the text's start)
_HOLDS_ROLE = re.compile(
    r"\s*(?:(?:will|shall|now|still|currently|officially|also|temporarily|again|"
    r"just)\s+)*"
    r"(?:(?:is|are|was|were|be|remains?|stays?|'s|'re|has\s+been|have\s+been|becomes?|became)\s+"
    r"(?:(?:now|still|currently|officially|also|temporarily|again)\s+)*"
    # "... is the <anything>": there is one of it; "... is on call", "... is responsible for"
    rf"(?:(?:the|our|their)\s+(?!{_RANKED}\b)[\w-]+|{_ROLE_NOUN}(?![\w-]))"
    rf"|{_ROLE_VERB}(?![\w-]))", re.I)


def _actors(text: str, names: frozenset[str]) -> tuple[frozenset[str], int]:
    """The names a statement opens with: who it says does or is something ("Sofia and Ben will pair
    ...", "Stark Industries pays ..."), and where they end. Empty when it opens with a thing ("Ticket
    #404 is assigned to Ana", "On-call this week is Kenji")."""
    out: set[str] = set()
    end = 0
    for m in re.finditer(r"[\w'\u2019-]+|[,&]", text):
        low = re.sub(r"['\u2019]s?$", "", m.group(0).lower())
        if low in names:
            out.add(low)
            end = m.end()
        elif not (out and low in {"and", "&", ","}):
            break
    return frozenset(out), end


def _other_actors(a_text: str, b_text: str, a: Statement, b: Statement) -> bool:
    """Whether the two say what different people (or customers, teams) do or are: "Sofia will pair
    with Ben on the refactor" and "Kenji will pair with Maria on the refactor" are two pairings, not
    one with two names; "Globex prefers invoices in EUR" and "Initech prefers invoices in USD" two
    customers' preferences. Not when both say their people hold a role (an owner, a lead, the one on
    call): it has one holder."""
    (actors_a, end_a), (actors_b, end_b) = _actors(a_text, a.places), _actors(b_text, b.places)
    if not actors_a or not actors_b or not _differ(actors_a, actors_b):
        return False
    if not all(_HOLDS_ROLE.match(t, end) for t, end in ((a_text, end_a), (b_text, end_b))):
        return True
    # ... of one thing: "Ben owns the Stripe integration" and "Omar owns the Adyen integration now" hold
    # the same role of two things, whose names beside the holders differ, as do "Luis owns the checkout
    # service" and "Omar owns the checkout service docs", whose things held differ
    if _differ(a.places - actors_a, b.places - actors_b):
        return True
    held_a, held_b = _holdings(a_text), _holdings(b_text)
    return bool(held_a and held_b and held_a[0].head != held_b[0].head)


# "Marco owns the billing service" vs "Ownership of the billing service moved to Aisha": a role handed
# over to a new holder, in other words than the statement of the old one.
# a name, capitalised even where the rest of a pattern ignores case
_HOLDER = r"(?P<{}>(?-i:[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)?))"
_ROLE_KIND = {"ownership": "own", "owner": "own", "own": "own", "owns": "own", "owned": "own",
              "leadership": "lead", "lead": "lead", "leads": "lead", "led": "lead",
              "management": "manage", "manager": "manage", "manage": "manage", "manages": "manage",
              "managed": "manage"}
_HANDED_OVER = re.compile(
    r"^(?:the\s+)?(?P<role>ownership|leadership|management)\s+of\s+(?P<thing>[^.;]+?)\s+"
    r"(?:has\s+|have\s+|was\s+|were\s+|is\s+|got\s+)?(?:moved|moves|passed|passes|went|goes|handed(?:\s+over)?|"
    r"transferred|transfers)\s+(?:over\s+)?to\s+" + _HOLDER.format("new") + r"(?![\w-])", re.I)
_HOLDS = (
    re.compile(_HOLDER.format("holder") + r"\s+(?:(?:now|still|currently|will)\s+)*(?P<role>owns?|leads?|manages?|"
               r"(?:is|will\s+be)\s+(?:now\s+)?(?:the\s+)?(?:owner|lead|manager)\s+(?:of|for))\s+(?P<thing>[^.;]+)"),
    re.compile(r"^(?:the\s+)?(?P<thing>[^.;]+?)\s+(?:is|are)\s+(?:now\s+|still\s+)?(?P<role>owned|led|managed)\s+by\s+"
               + _HOLDER.format("holder") + r"(?![\w-])"),
)


def _thing_of(text: str) -> frozenset[str]:
    return frozenset(_lemma(w) for w in re.findall(r"[\w-]+", text.lower())) - _EMPTY - _DROP


# "Ben does not own the Stripe integration anymore; Omar owns it now", "Priya no longer owns the billing
# dashboard; Luis does": the old holder denied, and in a clause after it a new one of "it".
_DENIED_HOLDER = re.compile(
    _HOLDER.format("holder") + r"\s+(?:(?:does|do|did)\s+not|doesn'?t|don'?t|didn'?t|no\s+longer|is\s+no\s+longer|"
    r"isn'?t|is\s+not)\s+(?:the\s+)?(?P<role>owner|owns?|leads?|manager|manages?)(?:\s+(?:of|for))?\s+(?P<thing>.+)")
_DOES_HOLDER = re.compile(_HOLDER.format("holder") + r"\s+(?:now\s+)?(?:does|do)(?:\s+now)?\s*[.!]?$")
_PRONOUN_THING = re.compile(r"^(?:it|them|that|this)\b", re.I)
# Words of the change, not of the thing held: "... anymore", "... now", "from now on".
_CHANGE_WORDS = re.compile(r"\b(?:now|anymore|any\s+(?:more|longer)|from\s+now\s+on|going\s+forward|again|instead)\b",
                           re.I)
# Where the thing held ends and its scope begins: "the Stripe integration | for Atlas".
_SCOPE_START = re.compile(r"\s+(?:for|in|on|at|across|within|during|until|while|since|from|after|before|with|"
                          r"because|this|next|starting)\s+", re.I)
# A scope that is only a name ("for Atlas", "for Initech") says which project or customer the thing is
# for, the one the other side means; a noun phrase ("for the EU region", "for the mobile app") carves
# out a part of it, as a date's scope does (``_scope``).
_NAME_SCOPE = re.compile(r"for\s+(?-i:[A-Z][\w-]{0,40})(?:\s+(?-i:[A-Z][\w-]{0,40}))?")


@dataclass(frozen=True)
class _Holding:
    """A clause saying who holds a role (owns, leads, manages) of what."""
    holder: str
    kind: str
    head: frozenset[str]
    scope: frozenset[str]
    named_scope: bool
    new: bool  # given as the current holder: "now", or after the old holder is denied
    denied: bool


def _holding(clause: str, before: _Holding | None) -> _Holding | None:
    """The holding a clause states, "it" and "does" being the thing of the holding ``before`` it."""
    new = bool(re.search(r"\bnow\b", clause, re.I)) or (before is not None and before.denied)
    denied = _DENIED_HOLDER.match(clause)
    if denied:
        held, role, thing = denied, denied["role"], denied["thing"]
    else:
        does = _DOES_HOLDER.match(clause)
        if does and before is not None:
            return _Holding(does["holder"], before.kind, before.head, before.scope, before.named_scope, new, False)
        held = next((m for m in (p.match(clause) for p in _HOLDS) if m), None)
        if held is None:
            return None
        role, thing = held["role"], held["thing"]
    kind = next(_ROLE_KIND[w] for w in role.lower().split() if w in _ROLE_KIND)
    thing = _CHANGE_WORDS.sub(" ", thing).strip(" ,.!")
    if _PRONOUN_THING.match(thing):
        if before is None or before.kind != kind:
            return None
        head, scope, named = before.head, before.scope, before.named_scope
    else:
        cut = _SCOPE_START.search(thing)
        where = thing[cut.start():].strip() if cut else ""
        head, scope, named = _thing_of(thing[:cut.start()] if cut else thing), _thing_of(where), bool(
            _NAME_SCOPE.fullmatch(where))
    return _Holding(held["holder"], kind, head, scope, named, new and not denied, bool(denied))


def _holdings(text: str) -> list[_Holding]:
    out: list[_Holding] = []
    for sentence in _sentences(text):
        for s, e in _clause_spans(sentence):
            h = _holding(_LEAD_IN.sub("", sentence[s:e].strip(), count=1), out[-1] if out else None)
            if h is not None:
                out.append(h)
    return out


_ROLE_WORD = re.compile(r"\b(?:own|lead|led\b|manag)", re.I)


def _new_holder(a_text: str, b_text: str) -> str | None:
    """One side gives a role a new holder ("Omar owns the Stripe integration for Atlas now", "Ben does
    not own the Stripe integration anymore; Omar owns it now"), the other another holder of the same
    role of the same thing (the same words, and the same scope or none beside a project's name)."""
    if not (_ROLE_WORD.search(a_text) and _ROLE_WORD.search(b_text)):
        return None  # (the clause reading is the cost: most pairs name no role at all)
    held = {a_text: _holdings(a_text), b_text: _holdings(b_text)}
    for x_text, y_text in ((a_text, b_text), (b_text, a_text)):
        if _NOT_DONE.search(x_text) or _PUT_OFF.search(x_text):
            continue
        for x in held[x_text]:
            if not x.new or not x.head:
                continue
            for y in held[y_text]:
                if y.denied or y.kind != x.kind or y.holder.lower() == x.holder.lower() or y.head != x.head:
                    continue
                if x.scope == y.scope or (not (x.scope and y.scope) and (x.named_scope or y.named_scope)):
                    return f"role handed over: {y.holder} vs {x.holder}"
    return None


def _handed_over(a_text: str, b_text: str) -> str | None:
    """One side hands a role over to someone ("Ownership of the billing service moved to Aisha"), the
    other gives it another holder ("Marco owns the billing service"): the same role (owning, leading,
    managing) of the same thing (one side's words within the other's)."""
    for x_text, y_text in ((a_text, b_text), (b_text, a_text)):
        handed = _HANDED_OVER.match(x_text.strip())
        if handed is None or _NOT_DONE.search(x_text) or _PUT_OFF.search(x_text):
            continue
        for pattern in _HOLDS:
            held = pattern.match(y_text.strip())
            if held is None or handed["new"].lower() == held["holder"].lower():
                continue
            kind = next(_ROLE_KIND[w] for w in held["role"].lower().split() if w in _ROLE_KIND)
            if kind != _ROLE_KIND[handed["role"].lower()]:
                continue
            x_thing, y_thing = _thing_of(handed["thing"]), _thing_of(held["thing"])
            if x_thing and y_thing and (x_thing <= y_thing or y_thing <= x_thing):
                return f"role handed over: {held['holder']} vs {handed['new']}"
    return _new_holder(a_text, b_text)


def _unversioned(text: str, st: Statement, names: frozenset[str]) -> frozenset[str]:
    """The statement's numbers but the versions right after these names ("PostgreSQL 15")."""
    low = text.lower()
    return st.numbers - {m.group(1) for n in names for m in re.finditer(rf"\b{re.escape(n)}\s+v?(\d+(?:\.\d+)*)\b", low)}


def only_counts_differ(a_text: str, b_text: str) -> bool:
    """Whether the numbers two statements disagree on are all counts of things ("Board: 7 tickets
    in progress, 2 blocked." vs "Board: 9 tickets in progress, 3 blocked."; "21 of 34 points done"
    vs "28 of 34"): what a recurring status line reports that day, not a claim the next day's
    contradicts. A version or a value ("Postgres 15" vs "16", "at 14:00") is not a count."""
    a_text, b_text = _rule_text(a_text), _rule_text(b_text)
    a_all, b_all = set(_NUMBER.findall(a_text)), set(_NUMBER.findall(b_text))
    differing = a_all ^ b_all
    if not differing:
        return False
    return differing <= (_counts(a_text) | _counts(b_text))


# A number after one of these is a setting's value ("the limit is 500 requests", "we run 3 replicas",
# "scaled to 5 nodes"), and one before "per"/"a"/"an" a rate ("500 requests per minute"): changing
# either is a claim the older one contradicts, not a day's tally.
_SETTING_BEFORE = {"is", "are", "was", "were", "be", "been", "to", "at", "run", "runs", "running", "use", "uses",
                   "using", "set", "keep", "keeps", "need", "needs", "allow", "allows", "max", "maximum", "min",
                   "minimum", "limit", "limited", "cap", "capped", "of", "=", "with", "has", "have"}
# A duration after one of these is a setting's too ("tokens expire after 15 minutes", "alerts page within
# 5 minutes", "the job runs every 6 hours"), and so is a number of times said in the present ("the
# webhook retries 5 times", "we will retry 3 times"); one in the past ("the job failed 3 times", "the
# deploy took 26 minutes") is that day's tally. Times are no things counted.
_DURATION_SETTING_BEFORE = {"after", "within", "every"}
_DURATION = re.compile(r"\s+(?:seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?|ms)\b")
_TIMES = re.compile(r"\s+times\b")


def _counts(text: str) -> set[str]:
    out = set()
    for m in _COUNT.finditer(text):
        before = re.findall(r"[\w=]+", text[: m.start()].lower())
        after = text[m.end():].lower()
        if before and before[-1] in _SETTING_BEFORE:
            continue
        if before and before[-1] in _DURATION_SETTING_BEFORE and _DURATION.match(after):
            continue
        if before and _TIMES.match(after) and before[-1] not in _PAST and not before[-1].endswith("ed"):
            continue
        if re.match(r"\s+(?:of\s+\d+\s+)?(?:[a-z]+\s+){0,2}?(?:per|a|an|each|every)\b", after):
            continue
        out.add(m.group(1))
    return out


# The rules read statements: a text's first sentences up to this many characters. A 20,000-character
# turn is a document, not a statement, and the clause rules grow faster than its length (a worker
# spent 40 s on one pair).
MAX_RULE_CHARS = 1000


def _rule_text(text: str) -> str:
    if len(text) <= MAX_RULE_CHARS:
        return text
    cut = text[:MAX_RULE_CHARS]
    end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "), cut.rfind("\n"))
    return cut[:end + 1] if end > MAX_RULE_CHARS // 2 else cut


def conflict_reason(a_text: str, b_text: str, a_entities=(), b_entities=()) -> str | None:
    """Why two statements of the same subject contradict, or None. Questions assert nothing: only
    what each text states is compared, and a text that only asks contradicts nothing."""
    # A lead-in ("Update:", "FYI") is no word of the statement: kept, it pushed a restatement
    # under the same-statement rule's overlap.
    a_text, b_text = (_LEAD_IN.sub("", asserted(_rule_text(t)), count=1).strip() for t in (a_text, b_text))
    if not a_text or not b_text:
        return None
    a, b = statement(a_text, a_entities), statement(b_text, b_entities)
    left = _left_place(a_text, b_text, a, b)
    if left:
        return f"different place or name for the same statement: lives or works in {left} vs left {left}"
    if len(a.core | b.core) < 2 or _other_referents(a_text, b_text, a, b):
        # "release plan v29" vs "release plan v59": two things with their own names, not one
        # statement with two numbers
        return None
    changed = (_changed_version(a_text, b_text, a, b) or _rescheduled(a_text, b_text, a, b)
               or _contrasted_when(a_text, b_text)
               or _event_date(a_text, b_text, a, b) or _changed_value(a_text, b_text, a, b)
               or _contrasted_value(a_text, b_text, a, b) or _value_with_detail(a_text, b_text, a, b)
               or _gave_up(a_text, b_text, a, b) or _cancelled(a_text, b_text, a, b)
               or _handed_over(a_text, b_text) or _other_value(a_text, b_text, a, b))
    if changed:
        return changed
    if a.negated == b.negated:
        flipped = _opposite_state(a_text, b_text)
        if flipped:
            return flipped
    overlap = len(a.core & b.core) / len(a.core | b.core)
    # (what is denied must be what is stated: "the password is not orchid77" denies nothing of "tulip42")
    if (a.negated != b.negated and overlap >= 0.8 and a.numbers == b.numbers and a.places == b.places
            and a.idents == b.idents):
        return "negation flip: one statement denies the other"
    if a.negated != b.negated and _denies_a_detail_of(*((a, b) if a.negated else (b, a))):
        return "negation flip: one statement denies what the other states with more detail"
    if _denied_clause(a_text, b_text, a_entities, b_entities):
        return "negation flip: a clause of one statement denies what the other states"
    if a.negated == b.negated and overlap >= 0.75:
        if a.numbers and b.numbers and _differ(a.numbers, b.numbers) and a.places == b.places:
            return (f"different number or date for the same statement: "
                    f"{', '.join(sorted(a.numbers))} vs {', '.join(sorted(b.numbers))}")
        # a version goes with its name: "The ledger database is PostgreSQL 15" vs "... is CockroachDB"
        if (a.places and b.places and _differ(a.places, b.places)
                and _unversioned(a_text, a, a.places - b.places) == _unversioned(b_text, b, b.places - a.places)
                and not _other_actors(a_text, b_text, a, b)):
            return (f"different place or name for the same statement: "
                    f"{', '.join(sorted(a.places))} vs {', '.join(sorted(b.places))}")
    if a.numbers and b.numbers and _differ(a.numbers, b.numbers):
        return _part_numbers(a_text, b_text, a_entities, b_entities)
    return None


# Where a statement ends and an aside begins: "the Q3 budget is 55,000 euros, finance approved the
# increase", "... 55,000 euros after finance approved it". (", " before a digit is a number's own.)
_ASIDE = re.compile(r"[;,]\s+(?!\d)|\s+(?:after|because|since|as|so|once|when)\s+|\s[\u2014\u2013-]\s", re.I)
_MAX_PARTS = 4


def _part_numbers(a_text: str, b_text: str, a_entities=(), b_entities=()) -> str | None:
    """The same statement with another number, one side with an aside after it: the whole texts
    share too few words for the same-statement rule ("The Q3 marketing budget is 40,000 euros." vs
    "Correction: the Q3 marketing budget is 55,000 euros, finance approved the increase."), their
    first parts all of them. Only where an aside was cut: two texts without one were compared whole."""
    def parts(text: str, entities) -> list[tuple[Statement, bool]]:
        out = []
        for sentence in _sentences(text)[:_MAX_PARTS]:
            head = _ASIDE.split(sentence, maxsplit=1)[0]
            st = statement(head, [e for e in entities if e in head])
            if st.numbers and len(st.core) >= 2:
                out.append((st, len(head.strip()) < len(sentence.strip().rstrip(".!"))))
        return out

    for x, x_cut in parts(a_text, a_entities):
        for y, y_cut in parts(b_text, b_entities):
            if not (x_cut or y_cut):
                continue
            if x.negated != y.negated or x.places != y.places or not _differ(x.numbers, y.numbers):
                continue
            if len(x.core & y.core) / len(x.core | y.core) >= 0.75:
                return (f"different number or date for the same statement: "
                        f"{', '.join(sorted(x.numbers))} vs {', '.join(sorted(y.numbers))}")
    return None
