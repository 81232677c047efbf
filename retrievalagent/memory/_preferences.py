"""Offline recognition of a stated preference ("I prefer answers in German.").

Without a chat model nothing understands free text, so a few documented rules recognise
the common ways of stating how answers should be given. A sentence counts only when the
whole sentence is the request (so "Why do people prefer answers in German?" is a question,
not a preference). Each rule gives a subject -- at most one preference per subject is
kept, a newer one replaces the older -- and a normalised instruction that is what the
answer prompt later shows. The table in ``docs/memory.md`` lists these rules.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage

from retrievalagent._inputs import content_text

__all__ = [
    "LANGUAGES",
    "PREFERENCE_WORDS",
    "Preference",
    "asks",
    "by_subject",
    "each_stated",
    "find_preference",
    "last_stated",
    "preferences_in",
    "stated_preferences",
    "subject_of",
]

LANGUAGES = frozenset(
    [
        "afrikaans",
        "albanian",
        "arabic",
        "armenian",
        "basque",
        "bengali",
        "bulgarian",
        "catalan",
        "chinese",
        "croatian",
        "czech",
        "danish",
        "dutch",
        "english",
        "esperanto",
        "estonian",
        "finnish",
        "french",
        "galician",
        "georgian",
        "german",
        "greek",
        "hebrew",
        "hindi",
        "hungarian",
        "icelandic",
        "indonesian",
        "irish",
        "italian",
        "japanese",
        "korean",
        "latin",
        "latvian",
        "lithuanian",
        "malay",
        "norwegian",
        "persian",
        "polish",
        "portuguese",
        "romanian",
        "russian",
        "serbian",
        "slovak",
        "slovenian",
        "spanish",
        "swahili",
        "swedish",
        "tagalog",
        "tamil",
        "thai",
        "turkish",
        "ukrainian",
        "urdu",
        "vietnamese",
        "welsh",
    ]
)


#: Words a question about a subject's preference may use beside its name and instruction
#: ("How should you call me?", "What format do I like my answers in?").
PREFERENCE_WORDS = {
    "language": "languages speak",
    "length": "long short brief length detailed concise",
    "format": "format formatting bullets list",
    "tone": "tone formal casual friendly style",
    "address": "call name called address",
}


@dataclass(frozen=True)
class Preference:
    """A recognised preference: its subject and the instruction the prompt shows."""

    subject: str
    instruction: str


# Words people put around a request without changing it ("Actually, answer in German
# instead.", "OK so from now on reply in French, thanks").
_LEAD = (
    r"(?:(?:please|kindly|from now on|always|going forward|moving forward|by default|in future|"
    r"in the future|actually|"
    r"ok|okay|well|also|and|so|oh|hey|hi|now|no|sorry|correction|wait|hmm|um|just|instead|"
    r"then|on second thought|by the way|btw|one more thing|change of plans?)[,:;\s]+)*"
)
_ANSWERS = r"(?:answers?|replies|reply|responses?|explanations?)"
_RESPOND = r"(?:answer|reply|respond|write|talk|speak|explain(?: things)?)"
_TAIL = (
    r"(?:[,\s]+(?:please|from now on|in future|in the future|going forward|moving forward|"
    r"by default|always|thanks|thank you|"
    r"instead|now|then|too|as well|again|for me|if you can|if possible))*"
)
_LANG = r"(?P<language>[A-Za-z]+)"
#: A marker that a request is for good, or a request at all.
_FOR_GOOD = (
    r"(?:[,\s]+(?:please|from now on|going forward|moving forward|in future|in the future|"
    r"by default|for me|with me))"
)


def _rule(body: str) -> re.Pattern[str]:
    return re.compile(rf"^{_LEAD}{body}{_TAIL}$", re.IGNORECASE)


_LANGUAGE_RULES = [
    _rule(rf"i(?:'d| would)? (?:prefer|like|want) (?:my |your |the )?{_ANSWERS} in {_LANG}"),
    _rule(rf"(?:can you |could you |you should )?{_RESPOND}(?: to me)?(?: only)? in {_LANG}"),
    _rule(
        rf"i(?:'d| would)? (?:prefer|like) (?:it )?(?:if you )?(?:{_RESPOND}|you to {_RESPOND})(?: to me)? in {_LANG}"
    ),
    _rule(rf"(?:use|speak) {_LANG}(?: with me| when you {_RESPOND})?"),
    # said for good or asked for ("Switch to English please."): bare, "Switch to German."
    # is a step of a how-to, and "Spanish replies." an answer
    _rule(rf"(?:switch|change)(?: over)? (?:back )?to {_LANG}{_FOR_GOOD}"),
    _rule(rf"(?:only )?{_LANG} {_ANSWERS}(?: only)?{_FOR_GOOD}"),
]
_LENGTH = {
    "short": "Keep answers short.",
    "shorter": "Keep answers short.",
    "brief": "Keep answers short.",
    "concise": "Keep answers short.",
    "detailed": "Give detailed answers.",
    "longer": "Give detailed answers.",
    "long": "Give detailed answers.",
    "thorough": "Give detailed answers.",
}
_LENGTH_RULES = [
    _rule(rf"i(?:'d| would)? (?:prefer|like|want) (?P<length>\w+)(?: and \w+)? {_ANSWERS}"),
    _rule(rf"(?:keep|make) (?:your |the |my )?{_ANSWERS} (?P<length>\w+)"),
    _rule(rf"(?:be|keep it) (?:more |very )?(?P<length>\w+)(?: in your {_ANSWERS})?"),
]
_BULLETS = r"(?:a )?bullet(?:ed)? (?:points|lists?)"
_FORMAT_RULES = [
    _rule(
        rf"(?:use|give me|i(?:'d| would)? (?:prefer|like)) {_BULLETS}(?: in (?:your )?{_ANSWERS})?"
    ),
    _rule(rf"(?:{_RESPOND}|format (?:your )?{_ANSWERS}) (?:in|as|with) {_BULLETS}"),
    _rule(rf"i(?:'d| would)? (?:prefer|like) {_ANSWERS} (?:in|as) {_BULLETS}"),
]
_TONE_RULES = [
    _rule(r"(?:use|keep) an? (?P<tone>formal|informal|casual|friendly|neutral|professional) tone"),
    _rule(r"(?:be|sound) (?:more )?(?P<tone>formal|informal|casual|friendly|professional)"),
    _rule(
        rf"i(?:'d| would)? (?:prefer|like) (?:a )?(?P<tone>formal|informal|casual|friendly|professional) (?:tone|{_ANSWERS})"
    ),
]
_ADDRESS_RULES = [
    _rule(r"(?:call me|address me as|refer to me as) (?P<name>[\w .'-]{1,40}?)"),
]
# A sentence ends at . ! or ? -- not after a title ("Address me as Dr. Lee.").
_TITLES = "".join(rf"(?<!\b{t}\.)" for t in ("Dr", "Mr", "Mrs", "Ms", "Mx", "Prof", "St"))
_SENTENCES = re.compile(rf"(?<=[.!?]){_TITLES}\s+|\n+")


#: Words no name is made of: "Call me after the board meeting" or "call me tomorrow" asks
#: for a phone call, not to be addressed by a name.
# fmt: off
_NOT_NAMES = frozenset({
    "a", "about", "after", "again", "an", "and", "any", "anytime", "around", "asap", "at",
    "back", "before", "by", "during", "every", "for", "from", "if", "in", "later", "maybe",
    "next", "now", "on", "once", "or", "soon", "sometime", "the", "this", "to", "today",
    "tomorrow", "tonight", "until", "when", "whenever", "while", "with",
})
# fmt: on


def _address(name: str) -> str | None:
    """The instruction for "Call me <name>", when <name> reads as one (one to three words,
    none of them a time, a preposition or a digit)."""
    words = name.split()
    if not 1 <= len(words) <= 3 or any(
        w.lower().strip(".") in _NOT_NAMES or any(c.isdigit() for c in w) for w in words
    ):
        return None
    return f"Address the user as {' '.join(words)}."


def _language(match: re.Match[str]) -> str | None:
    language = match.group("language")
    return f"Answer in {language.capitalize()}." if language.lower() in LANGUAGES else None


@dataclass(frozen=True)
class _Subject:
    """One subject's rules and the instruction a match of them gives (None: no match
    after all, e.g. "answer in Klingon", so the next rule is tried)."""

    name: str
    rules: list[re.Pattern[str]]
    instruction: Callable[[re.Match[str]], str | None]


# In order: a sentence matching rules of two subjects states the first one.
_SUBJECTS = (
    _Subject("language", _LANGUAGE_RULES, _language),
    _Subject("length", _LENGTH_RULES, lambda m: _LENGTH.get(m.group("length").lower())),
    _Subject("format", _FORMAT_RULES, lambda m: "Format answers as bullet points."),
    _Subject("tone", _TONE_RULES, lambda m: f"Use a {m.group('tone').lower()} tone."),
    _Subject("address", _ADDRESS_RULES, lambda m: _address(m.group("name"))),
)


#: A sentence that only changes the value of the preference stated just before it, in the
#: same message: "I prefer answers in German. Actually, English." A lead word that takes
#: the earlier words back is required ("German. English." says nothing clear), and "no"
#: counts only with a comma or "wait" after it: "No German, please." refuses German.
_TAKING_BACK = (
    r"(?:(?:actually|sorry|wait|oops|oh|hmm|correction|scratch that|on second thought|"
    r"i mean|i meant|make (?:that|it)|rather|forget (?:it|that)|never ?mind|no thanks|nope)"
    r"[,:;\s]+|no(?:[,:;]\s*|\s+(?=wait\b)))"
)
_CORRECTION = re.compile(
    rf"^{_TAKING_BACK}+(?:in )?(?P<value>[A-Za-z]+)"
    r"(?:[,\s]+(?:please|instead|then|thanks|thank you|rather))*$",
    re.IGNORECASE,
)
#: A sentence that withdraws the preference stated just before it, in the same message:
#: "Answer in German. Actually, no." states none.
_RETRACTION = re.compile(
    r"^(?:(?:actually|sorry|oh|wait|hmm|well|no)[,:;\s]+)*"
    r"(?:no|nope|scratch that|forget (?:it|that)|never ?mind|cancel (?:that|it)|"
    r"ignore (?:that|it)|not that)(?:[,\s]+(?:please|sorry|thanks))*$",
    re.IGNORECASE,
)
#: A sentence refusing a value ("No German, please."): after a preference for that same
#: value it withdraws it ("I prefer answers in German. No German, please." states none).
_REFUSAL = re.compile(
    r"^(?:no[,\s]+)*no\s+(?P<value>[A-Za-z]+)(?:[,\s]+(?:please|thanks|thank you))*$",
    re.IGNORECASE,
)
#: Words a correction of a name ("Call me Robert. No, Bob.") is never made of.
_NOT_CORRECTED_NAMES = frozenset(
    {"thanks", "thank", "please", "sure", "ok", "okay", "yes", "no", "fine", "great", "cool"}
)


def _corrected_name(value: str) -> str | None:
    """The instruction for a corrected name: a capitalised word that is a name."""
    if not value[:1].isupper() or value.lower() in _NOT_CORRECTED_NAMES:
        return None
    return _address(value)


#: The subjects a correction can change, and the instruction for its value (None: the word
#: is no value of that subject, and the sentence is not a correction).
_CORRECTED: dict[str, Callable[[str], str | None]] = {
    "language": lambda v: f"Answer in {v.capitalize()}." if v.lower() in LANGUAGES else None,
    "length": lambda v: _LENGTH.get(v.lower()),
    "tone": lambda v: (
        f"Use a {v.lower()} tone."
        if v.lower() in {"formal", "informal", "casual", "friendly", "professional"}
        else None
    ),
    "address": _corrected_name,
}


def _withdraws(sentence: str, before: Preference) -> bool:
    """Whether ``sentence`` takes back ``before``, the preference stated just before it:
    "Actually, no.", or a refusal of its very value ("No German, please.")."""
    if _RETRACTION.match(sentence):
        return True
    refused = _REFUSAL.match(sentence)
    change = _CORRECTED.get(before.subject)
    return bool(refused and change and change(refused.group("value")) == before.instruction)


def _correction(sentence: str, before: Preference | None) -> Preference | None:
    """The preference ``sentence`` states by correcting ``before`` (the one stated in the
    sentence just before it), or None."""
    change = _CORRECTED.get(before.subject) if before else None
    match = _CORRECTION.match(sentence) if change else None
    if not (before and change and match):
        return None
    instruction = change(match.group("value"))
    return Preference(before.subject, instruction) if instruction else None


def _sentence_preference(sentence: str) -> Preference | None:
    for subject in _SUBJECTS:
        for rule in subject.rules:
            if (m := rule.match(sentence)) and (instruction := subject.instruction(m)):
                return Preference(subject.name, instruction)
    return None


#: A request asked as a question: "Could you answer in German from now on?", "Please
#: could you ...?", "Would you mind answering in German from now on?"
_POLITE = re.compile(
    r"^(?:please,?\s+)?(?:could|can|would|will)\s+you\s+(?P<mind>mind\s+)?(?:please\s+)?"
    r"(?P<request>[^?]+?)(?:,?\s+please)?\s*\?$",
    re.IGNORECASE,
)
#: The verbs of the preference rules as "Would you mind ..." asks for them ("answering").
_GERUNDS = {
    "answering": "answer",
    "replying": "reply",
    "responding": "respond",
    "writing": "write",
    "talking": "talk",
    "speaking": "speak",
    "explaining": "explain",
    "keeping": "keep",
    "making": "make",
    "using": "use",
    "being": "be",
    "giving": "give",
    "formatting": "format",
}
#: What makes a request asked as a question a standing one: without it, "Can you speak
#: German?" asks what the agent can do, and "Could you answer in German again?" asks once.
_STANDING = re.compile(
    r"\b(?:from now on|going forward|moving forward|in (?:the )?future|always|by default)\b",
    re.IGNORECASE,
)


def _requested(question: str) -> Preference | None:
    """The preference a question asks for when it is a polite request for a standing one
    whose request is a whole preference sentence ("Can you keep answers short from now
    on?"); None for any other question ("Why do people prefer answers in German?", "Can
    you speak German?"). Never a name: "Could you call me Monday?" asks for a call."""
    polite = _POLITE.match(question)
    if polite is None or not _STANDING.search(polite.group("request")):
        return None
    request = polite.group("request")
    if polite.group("mind"):  # "mind answering in German" asks to "answer in German"
        verb, _, rest = request.partition(" ")
        if verb.lower() not in _GERUNDS:
            return None
        request = f"{_GERUNDS[verb.lower()]} {rest}"
    stated = _sentence_preference(request)
    return stated if stated is not None and stated.subject != "address" else None


def asks(message: str) -> bool:
    """Whether ``message`` asks something: a question that is not a polite request for a
    preference ("Could you answer in German from now on?" asks nothing of the documents)."""
    return any(
        sentence.endswith("?") and stated is None for sentence, stated in _sentences(message)
    )


#: Subjects a correction sent as the user's next message may change: those whose values
#: are a closed set. A name is not one: after "Call me Robert.", a reply such as "Oh,
#: Nice." or "Sorry, PostgreSQL." names no one.
_CORRECTED_LATER = frozenset({"language", "length", "tone"})

#: A sentence that may come before a correction sent as the next message ("Hmm. Actually,
#: English.").
_INTERJECTION = re.compile(
    r"^(?:(?:h+m+|oh+|oops|wait|sorry|ah+|uh+|um+|ok(?:ay)?|alright|well|right|so)[,\s]*)+$",
    re.IGNORECASE,
)


def _corrected_later(sentence: str, before: Sequence[Preference]) -> Preference | None:
    """The preference ``sentence`` states by correcting one of ``before`` (what the user's
    previous message stated, latest last): the latest whose subject takes its value."""
    for preference in reversed(before):
        if preference.subject in _CORRECTED_LATER:
            corrected = _correction(sentence, preference)
            if corrected is not None:
                return corrected
    return None


#: A fenced code block: what it holds was pasted, not said ("my test sends this prompt:"
#: and a request in a block is the test's, not the user's).
_CODE_BLOCK = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)


def _sentences(
    message: str, before: Sequence[Preference] = ()
) -> list[tuple[str, Preference | None]]:
    """Each sentence of ``message`` and the preference it states (None for a question or
    anything else): a sentence counts only as a whole, or as a correction of the one just
    before it ("Actually, English."), which one that withdraws it leaves stating nothing
    ("Actually, no."). ``before``: what the user's previous message stated, which the
    first sentence may correct ("I prefer answers in German." then "Actually, English.")."""
    out: list[tuple[str, Preference | None]] = []
    opening = True  # no sentence but an interjection yet
    for raw in _SENTENCES.split(_CODE_BLOCK.sub("\n", message)):
        sentence = " ".join(raw.split()).rstrip(".!").strip()
        if sentence:
            asked = sentence.endswith("?")
            stated = _requested(sentence) if asked else _sentence_preference(sentence)
            if stated is None and opening and before and not asked:
                stated = _corrected_later(sentence, before)
            elif stated is None and out and not asked:
                last = out[-1][1]
                if last and _withdraws(sentence, last):
                    out[-1] = (out[-1][0], None)  # taken back: it states nothing
                else:
                    stated = _correction(sentence, last)
            opening = opening and stated is None and bool(_INTERJECTION.match(sentence))
            out.append((sentence, stated))
    return out


_UNSAFE = re.compile(r"[^a-z0-9]+")


def subject_of(key: str, instruction: str) -> str:
    """The subject a model's preference is kept under, so that a newer one on the same
    subject replaces it: the rules' own for an instruction they read ("Answer in
    German."), else the rules' subject the key names ("Language preference"), else the key
    made safe. A model names one subject many ways; the rules name it one way."""
    read = find_preference(instruction)
    if read is not None:
        return read.subject
    safe = _UNSAFE.sub("-", key.lower()).strip("-")[:40]
    named = [s.name for s in _SUBJECTS if s.name in safe.split("-")]
    return named[0] if len(named) == 1 else safe


def each_stated(messages: Iterable[str]) -> Iterator[list[tuple[str, Preference]]]:
    """What each of the user's ``messages`` (in a conversation, in order) states, each read
    as a correction of the one before it: "Actually, English." after "I prefer answers in
    German." states English, so that "No, French." after both corrects English."""
    before: list[Preference] = []
    for message in messages:
        stated = preferences_in(message, before=before)
        before = [preference for _, preference in stated]
        yield stated


def last_stated(history: Sequence[BaseMessage]) -> list[Preference]:
    """What the user's last message in ``history`` stated (see ``each_stated``): what the
    next message may correct (``before``). Only the user's own messages count: one with a
    name is another person's, in a shared chat."""
    own = (content_text(m.content) for m in history if isinstance(m, HumanMessage) and not m.name)
    last = deque(each_stated(own), maxlen=1)
    return [preference for _, preference in last[0]] if last else []


def by_subject(message: str, *, before: Sequence[Preference] = ()) -> list[Preference]:
    """The preferences ``message`` states, one per subject (its last), in the order the
    subjects are first stated: what one message leaves standing."""
    last = {p.subject: p for _, p in preferences_in(message, before=before)}
    return list(last.values())


def find_preference(message: str, *, before: Sequence[Preference] = ()) -> Preference | None:
    """The last preference stated in ``message`` (one whole sentence each), or None.
    ``before``: what the user's message just before it stated (see ``last_stated``), which a
    correction ("Actually, English.") changes."""
    stated = preferences_in(message, before=before)
    return stated[-1][1] if stated else None


def preferences_in(
    message: str, *, before: Sequence[Preference] = ()
) -> list[tuple[str, Preference]]:
    """Every preference ``message`` states, with the sentence stating it, in order: an
    imported message may state several, where a turn's grade keeps one. ``before``: as
    ``find_preference``."""
    return [(sentence, stated) for sentence, stated in _sentences(message, before) if stated]


def stated_preferences(message: str) -> list[Preference] | None:
    """The preferences ``message`` states when that is all it says ("I prefer answers in
    German. Keep answers short."); None when any sentence says something else."""
    stated = [preference for _, preference in _sentences(message)]
    if not stated or None in stated:
        return None
    return [preference for preference in stated if preference]
