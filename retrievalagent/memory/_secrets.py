"""Secrets a user pasted are not kept in long-term memory.

People paste API keys, passwords and tokens into a chat while asking for help with them.
Conversation memory is recalled in later conversations and shown to the model again, so
before anything is stored, what looks like a secret is replaced by ``[secret removed]``:
well-known key formats (OpenAI, Anthropic, GitHub, GitLab, Slack, AWS, Google, Stripe,
JSON web tokens, private key blocks, HTTP authorization headers), the password in a URL,
the value of an environment variable named like one (``PGPASSWORD=...``), the value after
words such as "password" (in a few languages), "token" or "api key" (after "password:",
the rest of the clause: pass phrases have spaces), and long random-looking strings of mixed
letters and digits. Secrets are also pasted inside what people copy from their work rather
than type as prose, so the value is masked there too: a quoted value under a secret-named
key (JSON, a Python dict, PHP's ``=>``; unquoted too: ``{"password": 12345678}``), an XML
element named like one (``<db:password>``) or a ``key``/``name`` attribute naming one before
a ``value`` attribute, a URL with only a password (``redis://:pw@host``), a password flag
(``--password``, mysql's glued ``-p``, ``sshpass -p``, ``curl -u user:pass``, ``redis-cli
-a``, ``docker login -p``, ``az login -p``, ``mongo -p``, ``smbclient -U user%pass``,
``htpasswd -b``, ``openssl -k``), an element whose ``key`` attribute names one (``<entry key="db.password">``),
a ``value`` right after a ``name``/``key`` naming one (a Kubernetes env entry, YAML or JSON:
the whole value as YAML reads it, block scalars too; in JSON also the value before the name),
a config line whose key has a secret's word in it (``secret_key_base: ...``), .netrc's
``login bob password ...``, a password-shaped word right after "password" ("my password
Zk9pqrW1"), the digits of a PIN or door code, "the password for the prod db is (now) ...",
"... = ...", "I changed the password for prod to ...", and the words after "my ssh
passphrase is". A sentence about the password is left alone ("is rotated every
month", "is kept in a vault"), and so is the shell's working directory (``PWD=/home/ana``).
A value found once is masked wherever its conversation repeats it
(``recurring_secrets``, ``mask_known``): replies quote what the user pasted. Ordinary
words, numbers, versions and ids (ticket 4411, PostgreSQL 13, a commit hash in lower-case
hex) are left alone.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "MASK",
    "mask_known",
    "mask_metadata",
    "mask_secrets",
    "masked_reply",
    "recurring_secrets",
]

MASK = "[secret removed]"
#: What a quoted value may open with: straight quotes, and the curly ones a phone or a word
#: processor types.
_QUOTES = "\"'“‘"

_KNOWN_FORMATS = re.compile(
    r"""
    -----BEGIN[A-Z ]*PRIVATE\ KEY-----.*?(?:-----END[A-Z ]*PRIVATE\ KEY-----|\Z)
    | \bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}
    | \b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}
    | \bgithub_pat_[A-Za-z0-9_]{20,}
    | \bglpat-[A-Za-z0-9_\-]{20,}
    | \bxox[abprs]-[A-Za-z0-9\-]{10,}
    | \b(?:AKIA|ASIA)[0-9A-Z]{16}\b
    | \bAIza[0-9A-Za-z_\-]{35}
    | \b(?:rk|pk|sk)_(?:live|test)_[A-Za-z0-9]{16,}
    | \beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}
    | (?i:\bauthorization)\s*:\s*(?i:basic|bearer|token|digest)\s+[^\s"',;]+
    """,
    re.VERBOSE | re.DOTALL,
)
# "is"/"was" before a value: "is now", "was changed to", "has been reset to" (the longer
# first: "is" alone would leave "now" as the value)
_IS_NOW = r"""(?:\b(?:is|was|has\s+been)\s+(?:now\s+)?(?:changed|set|reset|updated)\s+to\b
    |\b(?:is|was)\s+now\b|\bis\b|\bwas\b)"""
# "password: hunter2", "my token is abc123", "API_KEY=...", "secret = '...'"
_LABELLED = re.compile(
    rf"""
    (?P<label>(?:\b|_)(?:pass(?:word|wd|phrase)?|pwd|pw|secret(?:[ _-]?(?:access[ _-]?)?key)?
      |(?:api|access|auth|private)[ _-]?(?:key|token)|token|bearer|client[ _-]?secret|credentials?
      |(?:wi-?fi|wlan|wpa2?|network)[ _-]?key
      |passwort|kennwort|mot\ de\ passe|contrase[ñn]a|senha|wachtwoord|has[łl]o|пароль)\b)
    (?P<sep>\s*(?:[:=：]|{_IS_NOW}(?:\s*[:：])?|\b(?:ist|lautet)\b(?:\s*[:：])?|\best\b|\bes\b)\s*)
    (?P<value>"[^"\n]+"|'[^'\n]+'|“[^”\n]+”|‘[^’\n]+’|[^\s"',;]{{3,}})
    """,
    re.VERBOSE | re.IGNORECASE,
)
# the password runs to the last "@" before the host: passwords may hold "@" and "/"
# (the user may be empty: redis://:password@host). Each part has a bound: unbounded, a
# pasted 40,000-character run of "a." took 2.8 s (every word start a scheme's candidate).
_URL_PASSWORD = re.compile(
    r"(?P<head>\b[a-z][a-z0-9+.\-]{0,31}://[^\s:/@]{0,256}:)(?P<value>\S{1,256})"
    r"(?=@[^\s@]*(?:\s|$))",
    re.I,
)
# PGPASSWORD=..., export AWS_SECRET_ACCESS_KEY="...", GITHUB_TOKEN=...: an environment
# variable named like a secret (upper case, as the shell writes them)
_ENV_SECRET = re.compile(
    r"""\b[A-Z][A-Z0-9_]*(?:PASSWORD|PASSWD|PWD|TOKEN|SECRET|(?:API|ACCESS|SECRET|PRIVATE|AUTH)_?KEY)\s*=\s*(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s"',;]+)"""
)
# A key or tag named like a secret, as code and config files write it: "password",
# "db_password", "apiKey", "client-secret", "AWS_SECRET_ACCESS_KEY" (a prefix ends at "_",
# "-", "." or a lower-to-upper case change, so "oauth" and "bypass" do not qualify)
_SECRET_NAME = r"""
    (?:[A-Za-z0-9_.\-]*[_.\-]|[A-Za-z0-9_.\-]*[a-z](?=[A-Z]))?
    (?i:pass(?:word|wd|phrase)?|pwd|secret|token|(?:api|access|private|secret)[_\-]?key
      |credentials?|auth)
"""
# {"password": "Tr0ub4dor&3"}, {'api_key': '...'}, PHP's "password" => "...": the quoted
# value goes, its quotes stay; an unquoted one ({"password": 12345678}) when it ends the entry
# (not a call or a lookup: {'password': os.environ["PW"]}) and is not null, true or false
_QUOTED_SECRET = re.compile(
    rf"""(?P<kq>["']){_SECRET_NAME}(?P=kq)\s*(?::|=>)\s*
    (?P<q>["'])(?P<value>(?:\\.|(?!(?P=q))[^\\\n])+)(?=(?P=q))""",
    re.VERBOSE,
)
_BARE_SECRET = re.compile(
    rf"""(?P<kq>["']){_SECRET_NAME}(?P=kq)\s*(?::|=>)\s*
    (?!(?i:null|true|false|none|nil|undefined)\b)
    (?P<value>[^\s"'(){{}}\[\]<>,;]+)(?=\s*(?:[,}}\]\n]|$))""",
    re.VERBOSE,
)
# <password>...</password>, <apiKey>...</apiKey>, <db:password>, the value on a line of its own
_TAGGED_SECRET = re.compile(
    rf"""<(?P<tag>(?:[A-Za-z_][\w.\-]*:)?{_SECRET_NAME})(?:\s[^<>]*)?>\s*
    (?P<value>[^<\s](?:[^<\n]*[^<\s])?)(?=\s*</(?P=tag)\s*>)""",
    re.VERBOSE,
)
# <add key="Password" value="..."/>, <property name="db.password" value="..."/>: a key or
# name attribute naming a secret, then (a few attributes on) the value attribute
_ATTRIBUTE_SECRET = re.compile(
    rf"""(?<![\w:.\-])(?:key|name)\s*=\s*(?P<kq>["']){_SECRET_NAME}(?P=kq)
    (?:\s+[\w:.\-]+\s*=\s*(?:"[^"\n]*"|'[^'\n]*')){{0,8}}?
    \s+value\s*=\s*(?P<q>["'])(?P<value>(?:(?!(?P=q))[^\n])+)(?=(?P=q))""",
    re.VERBOSE,
)
# <entry key="db.password">...</entry> (Java's properties XML), <setting name="apiKey">...:
# an element whose key or name attribute names a secret holds it as its text
_KEYED_ELEMENT = re.compile(
    rf"""<(?P<tag>[A-Za-z_][\w:.\-]*)\s(?:[^<>]*?\s)?(?:key|name)\s*=\s*(?P<kq>["']){_SECRET_NAME}(?P=kq)
    [^<>]*(?<!/)>\s*(?P<value>[^<\s](?:[^<\n]*[^<\s])?)(?=\s*</(?P=tag)\s*>)""",
    re.VERBOSE,
)
# a Kubernetes env entry, YAML or JSON ("- name: DB_PASSWORD\n  value: X", {"name":
# "DB_PASSWORD", "value": "X"}), and AWS's {"Key": ..., "Value": ...}: a name or key naming
# a secret, then its value, read as YAML reads it (``_named_value_span``: the quotes of a
# quoted one stay; "valueFrom:" holds none)
_NAMED_VALUE = re.compile(
    rf"""(?<![\w.\-])(?P<nq>["']?)(?i:name|key)(?P=nq)[ \t]*:[ \t]*
    (?P<kq>["']?){_SECRET_NAME}(?P=kq)(?![\w.\-])\s*,?\s*(?P<vq>["']?)(?i:value)(?P=vq)[ \t]*:[ \t]*""",
    re.VERBOSE,
)
# ... and its value before its name in one JSON object ({"value": "X", "name": "DB_PASSWORD"},
# other keys between; not past the object's end, nor into another object)
_VALUE_THEN_NAME = re.compile(
    rf"""(?<![\w.\-])(?P<vq>["']?)(?i:value)(?P=vq)[ \t]*:[ \t]*
    (?P<q>["'])(?P<value>(?:\\.|(?P=q)(?P=q)|(?!(?P=q))[^\\\n])+)(?=(?P=q)
    [^{{}}]{{0,400}}?,\s*(?P<nq>["']?)(?i:name|key)(?P=nq)[ \t]*:[ \t]*
    (?P<kq>["']?){_SECRET_NAME}(?P=kq)(?![\w.\-]))""",
    re.VERBOSE,
)
# a quoted YAML or JSON value: "..." with backslash escapes, '...' with '' for a quote
_DOUBLE_QUOTED = re.compile(r'"((?:\\.|[^"\\\n])+)"')
_SINGLE_QUOTED = re.compile(r"'((?:''|[^'\n])+)'")
# a block scalar's header: "|", ">", "|-", ">+", "|2-" (a comment may follow)
_BLOCK_HEADER = re.compile(r"[|>](?:[1-9][+\-]?|[+\-][1-9]?)?[ \t]*(?:#.*)?$")
_COLLAPSED_BLOCK = re.compile(r"[|>](?:[1-9][+\-]?|[+\-][1-9]?)?[ \t]+")
# where a plain value ends on its line: a comment, the next key or list item (" - name:",
# " MODE: x" once newlines are collapsed into spaces: a plain YAML value holds no ": "), a
# flow comma before a key ({name: DB_PASSWORD, value: x, optional: true}) or ending the line
# (pretty-printed JSON)
_PLAIN_END = re.compile(
    r"""[ \t]+\#
    |\s+(?:-\s+)?["']?[A-Za-z_][\w.\-]*["']?:(?=\s|$)
    |\s*,\s*["']?[A-Za-z_][\w.\-]*["']?\s*:(?=[\s"'{\[]|$)
    |\s*,[ \t]*$""",
    re.VERBOSE,
)
# on the text's last line (a message with its newlines collapsed is one line), a value also
# ends with its clause: "value: hunter2. Why does the pod crash?"
_VALUE_CLAUSE_END = re.compile(r"[.!?;](?=\s|$)")
_BLANK = re.compile(r"[ \t]*$")
_LIST_ITEM = re.compile(r"-(?:\s|$)")
# a line that is not a value's continuation: a key, a list item or a comment
_NOT_CONTINUATION = re.compile(r"""[ \t]*(?:-(?:\s|$)|\#|["']?[\w.\-]+["']?[ \t]*:(?:\s|$))""")
# .netrc's "machine host login bob password X", and "login bob password X" said so
_NETRC = re.compile(
    r"""\blogin[ \t]+\S+\s+(?:password|passwd)[ \t]+(?P<value>"[^"\n]+"|'[^'\n]+'|“[^”\n]+”|‘[^’\n]+’|[^\s"']+)""",
    re.IGNORECASE,
)
# "username bob password hunter2", "user bob pass hunter2": a value with a digit or a symbol in it (a word there may
# be the sentence's: "the user admin password policy")
_USER_PASSWORD = re.compile(
    r"""\buser(?:name)?[ \t]+\S+[ \t]+(?:password|passwd|pass|pw)[ \t]+
    (?P<value>[^\s"'.,;]*[\d!@#$%^&*+=?~][^\s"']*?)(?=[.,;]?(?:\s|$))""",
    re.VERBOSE | re.IGNORECASE,
)
# "login: bob / Qx7!mmz9pL", "user=bob, Zk9pqrW1": a user, then a password-shaped value
# (``_password_shaped``: "user: bob / admin" names a role, not a password)
_LOGIN_PAIR = re.compile(
    r"""\b(?:login|user(?:name)?)[ \t]*[:=][ \t]*[^\s/|,;"']+[ \t]*[/|,][ \t]*
    (?P<value>[^\s"',;()\[\]{}<>]{6,}?)(?=[.,;:!?)]?(?:\s|$))""",
    re.VERBOSE | re.IGNORECASE,
)
# "TOTP seed: JBSWY3DPEHPK3PXP", "2FA secret = ...": after ":" or "=" only ("my 2FA key is
# lost" says what happened to it)
_OTP_SEED = re.compile(
    r"""\b(?:t?otp|2fa|mfa)[ _-]?(?:seed|secret|key)\s*[:=]\s*(?P<value>[A-Za-z0-9+/=_\-]{8,})""",
    re.VERBOSE | re.IGNORECASE,
)
# "my seed phrase is abandon ability able about ...": a wallet's words (BIP-39's have three
# to eight letters), eight or more (a
# seed phrase "was compromised", "is twelve words long" or "is stored offline" is prose)
_SEED_PHRASE = re.compile(
    r"""(?i:\b(?:(?:seed|recovery|mnemonic|wallet|backup)[ _-]?phrase|mnemonic)\b)
    (?:\s+(?i:is|was)|\s*[:=\-–—])\s*(?P<value>[a-z]{3,8}(?:[ ,]+[a-z]{3,8}){7,23})(?![a-z])""",
    re.VERBOSE,
)
# "I use the password 'letmein' everywhere": a quoted value right after a secret's name
# that something is done with (not "the password 'reset' flow", "the token 'access_token'")
_LABEL_THEN_QUOTED = re.compile(
    r"""\b(?:use[sd]?|using|set|chose|choose|picked|typed|entered|with)[ \t]+
    (?:(?:the|my|a|our|this)[ \t]+)?(?:pass(?:word|wd|phrase)|pwd|pw|secret|token|api[ _-]?key|pin)
    [ \t]+(?P<value>"[^"\n]{3,80}"|'[^'\n]{3,80}'|“[^”\n]{3,80}”|‘[^’\n]{3,80}’|`[^`\n]{3,80}`)""",
    re.VERBOSE | re.IGNORECASE,
)
#: A secret an assistant may ask for.
_ASKED_SECRET = r"""(?:password|passphrase|pass\s+phrase|passcode|pin(?:\s+code)?|token|api\s+key
  |secret\s+key|(?:verification|security|2fa|one-time|login)\s+code)"""
#: The assistant's last sentence, when it asks for a secret outright, so that the reply
#: that follows is one ("Please enter your password." then "Sunshine2024"; not "what's your
#: password policy?"): see ``asks_for_secret``.
_ASKS_FOR_SECRET = re.compile(
    rf"""^(?:(?:and|ok|okay|so|now|next|then|also|great|thanks|sure)[,!\s]+)*(?:
      (?:please\s+)?(?:enter|type|send|give\s+me|paste|provide|share|tell\s+me|confirm)
        (?:\s+me)?\s+(?:your|the)\s+(?:[\w\-]+\s+){{0,2}}?{_ASKED_SECRET}
      |what(?:'s|’s|\s+is|\s+was)\s+(?:your|the)\s+(?:[\w\-]+\s+){{0,2}}?{_ASKED_SECRET}
      |what\s+{_ASKED_SECRET}\s+did\s+you\s+(?:pick|choose|set|use)
      |(?:your|the)\s+{_ASKED_SECRET},?\s+please
      |(?:(?:your|the)\s+)?{_ASKED_SECRET})(?:\s+please)?\s*[.?!:]*$""",
    re.VERBOSE | re.IGNORECASE,
)
#: A request for a phrase of several words ("Please type the passphrase."): the whole
#: reply is one.
_ASKS_FOR_PHRASE = re.compile(r"\b(?:pass\s?phrase|seed\s+phrase|recovery\s+phrase)\b", re.I)
# "login with admin / Adm1nPa55!", "signed in as root | Tr0ub4dor&3", "my login is bob@x.com
# / Sunshine2024": a user, then a value shaped as a password (``_login_password_shaped``: "log
# in as ubuntu / ec2-user" names two users). The user: an email, a name with a digit or "_",
# or an account every system has ("the login is slow / Timeout=30s" names none)
_LOGIN_WITH = re.compile(
    r"""\b(?:(?:log(?:ged)?[ \t]?in|sign(?:ed)?[ \t]?in)[ \t]+(?:with|as|using)
      |login[ \t]+(?:is|was))[ \t]+(?:[^\s/|,;"'@]+@[^\s/|,;"']+|[\w.\-]*[\d_][\w.\-]*
      |(?i:admin|administrator|root|user|guest|ubuntu|pi|postgres|sa|test|demo))
    [ \t]*[/|][ \t]*(?P<value>[^\s"',;()\[\]{}<>]{6,}?)(?=[.,;:!?)]?(?:\s|$))""",
    re.VERBOSE | re.IGNORECASE,
)
# "the admin password changed; it's now Blue-Falcon-88": a secret's name, and later in the
# same sentence "it's now" (or "it's", "now it's") before a value shaped as only a password is
_SECRET_NOW = re.compile(
    r"""(?:\b|_)(?:pass(?:word|wd|phrase)|pwd|secret|token|api[ _-]?key|pin)\b
    (?:[^.!?\n]|[.!?](?=\S)){0,60}?
    \b(?:now\s+)?it(?:'|’|\s+i)s\s+(?:now\s+)?(?!\w+://|www\.)
    (?P<value>[^\s"',;()\[\]{}<>/]{6,}?)(?=[.,;:!?)]?(?:\s|$))""",
    re.VERBOSE | re.IGNORECASE,
)
# "creds for the NAS: Sunshine2024", "creds for the NAS: bob / Sunshine2024": after the
# colon a password's shape, alone or after a user and "/" (masked by ``_SHAPED``)
#: "creds", "credentials for the NAS": the label of both credential patterns.
_CREDS = r"\bcred(?:ential)?s?(?:\s+for(?:\s+[^\s:]+){1,3}?)?"
_CREDENTIALS_VALUE = re.compile(
    rf"""{_CREDS}
    (?:\s*[:=：]|\s+(?:are|is|were|was)\b:?|\s+[-–—])\s*(?:[^\s:/|"']+\s*[/|]\s*)?
    (?P<value>[^\s"',;()\[\]{{}}<>]{{6,}}?)(?=[.,;:!?)]?(?:\s|$))""",
    re.VERBOSE | re.IGNORECASE,
)
# "Google backup codes: 1234 5678, 9012 3456", "recovery codes:\n48213\n99812", "GitHub
# recovery codes: 4f8a2-9bc31 7d2e1-0a9f4", "recovery code 48213": the whole list (``_PIN``
# took its first code only), each code with a digit
_CODE = r"(?=[0-9A-Za-z\-]*\d)[0-9A-Za-z]{4,12}(?:-[0-9A-Za-z]{4,12}){0,3}"
# between codes: a comma, ";" or "/", spaces, or a new line, and a list's "-" or "1."
_CODE_GAP = r"(?:[ \t]*[,;/][ \t]*\n?|[ \t]*\n|[ \t]+)[ \t]*(?:(?:[-*•]|\d{1,2}[.)])[ \t]+)?"
_RECOVERY_CODES = re.compile(
    rf"""\b(?i:(?:recovery|backup|emergency|scratch|2fa|mfa|two[ -]factor)(?:\s+backup)?\s+codes?)
    (?i:\s+for\s+[^\s:]+(?:\s+[^\s:]+)?)?(?:\s*\([^()\n]{{1,30}}\))?(?:\s*\#\d{{1,2}})?
    (?P<colon>(?i:\s+(?:are|were|is|was))?[ \t]*[:=]|(?i:\s+(?:are|were|is|was)))?
    \s*(?:(?:[-*•]|\d{{1,2}}[.)])[ \t]+)?
    (?P<value>(?(colon)|(?!(?:19|20)\d\d\b)){_CODE}(?:{_CODE_GAP}{_CODE})*)(?![\w\-])""",
    re.VERBOSE,
)
# "the credentials are bob:hunter2", "credentials: bob:hunter2": the part after the user
_CREDENTIALS = re.compile(
    rf"""{_CREDS}\s*(?:[:=：]|\b(?:are|is|were|was)\b:?)
    \s*[^\s:"']+:(?P<value>[^\s"']+)""",
    re.VERBOSE | re.IGNORECASE,
)
# "my password Zk9pqrW1", "token abc123XYZ": no ":" or "is" between, so only a value that
# cannot be a word of the sentence (letters and digits mixed, see ``_password_shaped``)
_LABEL_THEN_VALUE = re.compile(
    r"""(?:\b|_)(?:pass(?:word|wd|phrase)|pwd|pw|secret|token|api[ _-]?key|passwort|kennwort)
    (?:['’]s)?(?:[ \t]+[-–—])?[ \t]+(?P<value>[^\s"',;()\[\]{}<>$%@&`][^\s"',;()\[\]{}<>]{5,}?)(?=[.,;:!?)]?(?:\s|$))""",
    re.VERBOSE | re.IGNORECASE,
)
# "my token, abcd1234efgh5678ijkl", "use this key: Zr8LqP2mX9vK4tW7": a comma after a
# secret's name, or a plain "key:", then a value only a generated key has the shape of
# (``_key_shaped``): after "key:" stand keys to press, regions, database and cache keys
_LABEL_THEN_KEY = re.compile(
    r"""(?:(?:\b|_)(?:pass(?:word|wd|phrase)|pwd|pw|secret|token|api[ _-]?key)[ \t]*,
      |\bkey(?:[ \t]*:|[ \t]+(?:is|was)\b))
    [ \t]+(?P<value>[A-Za-z0-9+/=_\-]{16,})(?=[.,;:!?)]?(?:\s|$))""",
    re.VERBOSE | re.IGNORECASE,
)
# "my PIN is 4821", "PIN: 4821", "the door code is 2291#": digits after a PIN's name
_PIN = re.compile(
    r"""\b(?:(?i:pin|pin\s+code|pin\s+number|passcode|pass\s+code|security\s+code|cvv|cvc
      |(?:door|alarm|garage|gate|safe|lock|entry|keypad|unlock|recovery|backup)\s+codes?)
      (?i:\s+for(?:\s+[^\s\d.,;:!?]+){1,3}?)?\s*(?:[:=#]|\b(?i:is|was)\b)
      |(?i:pin\s+code|pin\s+number|(?:door|alarm|garage|gate|safe|keypad)\s+code)|PIN)
    \s*(?P<value>\d{3,12}(?:-\d{2,12})*)\b""",
    re.VERBOSE,
)
# "cvv 123", "CVC2: 4821", "security code 123": a card's code, also with nothing between
_CARD_CODE = re.compile(r"\b(?i:cvv2?|cvc2?|security\s+code)\s*[:=#]?\s*(?P<value>\d{3,4})\b")
# a payment card's number: 13 to 19 digits, together or in groups (spaces, no-break spaces,
# dashes, dots), judged by ``_card_number``: a card network's first digits and the Luhn
# check digit (a phone number after "+", a run of years, an order number mostly fail); a
# word of its own: digits inside an id ("ea2396111932429296fa6e...", "req_4111...") are not
_CARD_NUMBER = re.compile(r"(?<![\w\-.+/])[2-6](?:[ \u00a0\-.]{0,2}\d){12,18}(?![\w\-])")
#: The first digits of the card networks' numbers (Visa, Mastercard, American Express,
#: Diners, JCB, Discover, UnionPay, Maestro), as ranges of the number's first four digits.
_CARD_NETWORKS = (
    (2221, 2720),
    (3000, 3059),
    (3400, 3499),
    (3528, 3589),
    (3600, 3699),
    (3700, 3799),
    (3800, 3999),
    (4000, 4999),
    (5000, 5999),
    (6011, 6011),
    (6200, 6299),
    (6440, 6599),
    (6700, 6799),
)
# a config line whose key names a secret by one of its words: "secret_key_base: ...",
# "db-password-prod = ..." (YAML, INI, .env in lower case); judged by ``_config_secret``
_CONFIG_LINE = re.compile(
    r"""^[ \t]*(?:-[ \t]+)?(?P<key>[A-Za-z][\w.\-]*)[ \t]*[:=][ \t]*
    (?P<value>"[^"\n]+"|'[^'\n]+'|“[^”\n]+”|‘[^’\n]+’|[^\s#"',;(){}\[\]<>$%@&][^\s#"',;(){}\[\]<>]*)
    (?=[.,;]?(?:\s|$))""",
    re.VERBOSE | re.MULTILINE,
)
# the words of a config key that name a secret, and of those the ones that say the value is
# one whatever it looks like when they end the key
_SECRET_WORDS = frozenset(
    [
        "password",
        "passwd",
        "pwd",
        "pw",
        "passphrase",
        "secret",
        "token",
        "apikey",
        "credential",
        "credentials",
        "auth",
    ]
)
_KEY_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
# the last word of a config key that holds something about the secret, not the secret
_ABOUT_THE_SECRET = re.compile(
    r"""(?i:[_.\-](?:count|counts|length|len|min|max|size|limit|type|kind|method|scheme|ttl
      |expiry|expires|expiration|lifetime|timeout|seconds|file|path|dir|url|uri|endpoint|hint
      |policy|enabled|required|name|user|username|header|env|id|version|format|algorithm))$""",
    re.VERBOSE,
)
# "the password for the prod db is hunter2" (or "...db: hunter2"): a few words, the first a
# preposition, between the label and "is" (more, or other words, and it is a sentence about
# the password: "the password manager we use is ..."). Judged as prose even after ":" ("my
# password for the VPN: nobody knows it")
_LABELLED_LATER = re.compile(
    rf"""
    (?P<label>(?:\b|_)(?:pass(?:word|wd|phrase)|pwd|pw|secret(?:[ _-]?(?:access[ _-]?)?key)?
      |(?:api|access|auth|private)[ _-]?(?:key|token)|token|client[ _-]?secret)\b)
    (?P<sep>\s+(?:for|to|on|of|at|in|with|from)(?:\s+[^\s.,;:!?="'()\[\]{{}}<>]+){{1,3}}?
      |\s*\([^()\n]{{1,40}}\))
    (?:\s*[:=]\s*|\s+{_IS_NOW}\s+)
    (?P<value>"[^"\n]+"|'[^'\n]+'|“[^”\n]+”|‘[^’\n]+’|[^\s"',;]{{3,}})
    """,
    re.VERBOSE | re.IGNORECASE,
)
# --password X, --password=X, --db-password X, --passwd X (not --no-password, not a next
# flag: "--password -h db"; "use --password to pass it" is judged as prose)
_FLAG_PASSWORD = re.compile(
    r"""(?<![\w-])--(?!no-)(?:[a-z0-9]+-)?(?P<label>password|passwd)(?P<sep>=|\s+)
    (?P<value>"[^"\n]+"|'[^'\n]+'|“[^”\n]+”|‘[^’\n]+’|(?<==)[^\s"',;]+|[^\s"',;\-][^\s"',;]*)""",
    re.VERBOSE | re.IGNORECASE,
)
# mysql -u root -pHunter2 app: mysql's -p takes its value glued (a lone "-p" prompts); only
# in a mysql/mariadb command, after its options: elsewhere "-pcf" is other flags
_MYSQL = r"(?:mysql(?:dump|admin|import|check|show|pump|sh)?|mariadb(?:-[a-z]+)?)\b"
_MYSQL_PASSWORD = re.compile(
    rf"""\b{_MYSQL}(?:\s+-\S+(?:\s+(?!{_MYSQL})[^\s\-]\S*)?)*?\s+-p(?![.,;:!?)]*(?:\s|$))
    (?P<value>"[^"\n]+"|'[^'\n]+'|“[^”\n]+”|‘[^’\n]+’|[^\s"']\S*)""",
    re.VERBOSE,
)
# sshpass -p 'X' ssh host
_SSHPASS = re.compile(
    r"""\bsshpass(?:\s+-[^\sp]\S*(?:\s+[^\s\-]\S*)?)*?\s+-p(?P<sep>\s*)
    (?P<value>"[^"\n]+"|'[^'\n]+'|“[^”\n]+”|‘[^’\n]+’|[^\s"'\-]\S*)""",
    re.VERBOSE,
)
# curl -u admin:Hunter2 https://...: the part after the colon (only in a curl command, within
# its sentence: docker's "-u 1000:1000" is a uid and gid). A command runs to the end of its
# sentence or to the next command of its kind (so "curl -u curl -u ..." stays linear)
_IN_COMMAND = r"""(?:(?!\b(?:{0})\b)(?:[^\n|;&.!?]|[.!?](?=\S)))*?"""
_CURL_USER = re.compile(
    rf"""\bcurl\b{_IN_COMMAND.format("curl")}\s(?:-u\s*|--user(?:\s+|=))["']?[^\s:"']*:
    (?P<value>[^\s"']+)""",
    re.VERBOSE,
)
# smbclient //srv/share -U admin%Hunter2: the part after "%"
_SMB_USER = re.compile(
    rf"""\b(?:smbclient|rpcclient|smbcacls)\b{_IN_COMMAND.format("smbclient|rpcclient|smbcacls")}
    \s(?:-U\s*|--user(?:\s+|=))["']?[^\s%"']*%
    (?P<value>[^\s"']+?)(?=[.,]?(?:[\s"']|$))""",
    re.VERBOSE,
)
# a value that is not punctuation ending the sentence ("mongo -p. It asks") and leaves a
# full stop or comma after it
_OPTION_VALUE = r"""(?P<value>"[^"\n]+"|'[^'\n]+'|“[^”\n]+”|‘[^’\n]+’|(?![.,;:!?)]*(?:\s|$))[^\s"'\-]\S*?(?=[.,]?(?:\s|$)))"""
# the option that takes a password, separated by spaces, in the commands that have one:
# redis-cli -a X, docker login -p X, az login -p X, mongo/mongosh -p X, ldapsearch -w X, sqlcmd -P X
# ("-p" elsewhere is a port: docker run -p 8080:80)
_COMMAND_PASSWORDS = [
    re.compile(
        rf"""\b(?:{command})\b{_IN_COMMAND.format(command)}\s{option}(?P<sep>\s+){_OPTION_VALUE}""",
        re.VERBOSE,
    )
    for command, option in (
        ("redis-cli", "-a"),
        (r"docker\s+login|podman\s+login|buildah\s+login|az\s+login", "-p"),
        ("mongo(?:sh|dump|restore|export|import|stat|top|files)?", "-p"),
        ("ldap(?:search|add|modify|delete|modrdn|passwd|whoami|compare|exop)", "-w"),
        ("sqlcmd|bcp", "-P"),
    )
]
# htpasswd -b(c) FILE USER PASSWORD: -b takes the password from the command line
_HTPASSWD = re.compile(
    r"""\bhtpasswd(?=(?:\s+-\w+)*?\s+-\w*b)(?:\s+-\w+)+\s+[^\s\-]\S*\s+[^\s\-]\S*\s+
    (?P<value>"[^"\n]+"|'[^'\n]+'|“[^”\n]+”|‘[^’\n]+’|[^\s"']+)""",
    re.VERBOSE,
)
# openssl ... -k X, -pass pass:X, -passin pass:X, -passout pass:X
_OPENSSL = re.compile(
    rf"""\bopenssl\b{_IN_COMMAND.format("openssl")}\s(?:-k\s+|-pass(?:in|out)?\s+pass:)
    (?P<value>"[^"\n]+"|'[^'\n]+'|“[^”\n]+”|‘[^’\n]+’|[^\s"']+)""",
    re.VERBOSE,
)
# after "password:" a pass phrase may have spaces: the rest of the clause goes
# (a clause ends at ";" or at ".", "!" or "?" before a space or the end: inside a word they
# belong to the password, as in "Sun.Flower!42")
_PASS_PHRASE = re.compile(
    r"""(?:\b|_)(?:pass(?:word|wd|phrase)?|pwd|pw|passwort|kennwort|mot\ de\ passe|contrase[ñn]a
      |senha|wachtwoord|has[łl]o|пароль)(?:\s+(?:is|was))?\s*[:=：]\s*
      (?P<value>[^\s"'\[;](?:[^.!?;\n]|[.!?](?=[^\s.!?;]))*)""",
    re.VERBOSE | re.IGNORECASE,
)
# "my ssh passphrase is correct horse": after "passphrase is" the rest of the clause (a pass
# phrase has spaces), judged by its words ("the passphrase is correct" is prose)
_PASSPHRASE_IS = re.compile(
    rf"""(?P<label>(?:\b|_)pass[ _-]?phrase\b)
    (?P<sep>(?:\s+(?:for|to|on|of|at|in|with|from)(?:\s+[^\s.,;:!?="'()\[\]{{}}<>]+){{1,3}}?)?
      \s+{_IS_NOW}\s+)
    (?P<value>[^\s"'\[;,.!?](?:[^.!?;,\n]|[.!?](?=[^\s.!?;]))*)""",
    re.VERBOSE | re.IGNORECASE,
)
# "the wifi password is purple monkey dishwasher", "my password is correct horse battery
# staple.": after "password is" two or more plain words to the clause's end (or its "and",
# "but" ...) are a pass phrase, masked whole (as one word, only its first went), unless
# they read as a sentence about it (``_password_phrase_prose``)
_JOINS = r"(?i:and|but|or|so|because|then|which|that)"
_PHRASE_WORD = rf"(?!{_JOINS}\b)[A-Za-z0-9]{{2,}}"
_PASSWORD_PHRASE_IS = re.compile(
    rf"""(?i:(?:\b|_)(?:pass(?:word|wd)|pwd|pw|passwort|kennwort)\b)
    (?:\s+(?i:for|on|of|at|to)(?:\s+[^\s.,;:!?="'()\[\]{{}}<>]+){{1,3}}?)?
    (?:\s+{_IS_NOW}\s+)
    (?P<value>(?=[A-Za-z0-9]*[A-Za-z]){_PHRASE_WORD}(?:[ \t]+{_PHRASE_WORD}){{1,11}})
    (?=[ \t]*(?:[.!?;,\n]|$)|[ \t]+{_JOINS}\b)""",
    re.VERBOSE,
)
# "I changed the password for prod to hunter2", "set my password to ..."
_CHANGED_TO = re.compile(
    r"""\b(?:changed|set|reset|updated|switched)\s+
    (?:(?:the|my|our|your|his|her|their|its|this|that)\s+)?(?:[\w\-]+\s+)?
    (?P<label>pass(?:word|wd|phrase)|pwd|pw)\b
    (?P<sep>(?:\s+(?:for|on|of|at|in)(?:\s+[^\s.,;:!?="'()\[\]{}<>]+){1,3}?)?\s+to\s+)
    (?P<value>"[^"\n]+"|'[^'\n]+'|“[^”\n]+”|‘[^’\n]+’|[^\s"',;]{3,})""",
    re.VERBOSE | re.IGNORECASE,
)
# 32+ characters of letters and digits (and - _ + / =) with upper case, lower case and digits
# mixed: what generated keys look like; lower-case hex (hashes) and words do not qualify.
_RANDOM = re.compile(r"(?<![A-Za-z0-9_\-+/=])[A-Za-z0-9_\-+/=]{32,}(?![A-Za-z0-9_\-+/=])")


# Words of a sentence, not of a password: after "password is" they are prose ("is not the
# same"), and a pass phrase does not start with one.
_FUNCTION_WORDS = frozenset(
    [
        "a",
        "all",
        "also",
        "an",
        "and",
        "at",
        "being",
        "but",
        "for",
        "her",
        "here",
        "his",
        "if",
        "in",
        "is",
        "its",
        "just",
        "my",
        "nobody",
        "none",
        "not",
        "nothing",
        "now",
        "on",
        "or",
        "our",
        "she",
        "still",
        "that",
        "the",
        "their",
        "there",
        "they",
        "this",
        "to",
        "too",
        "very",
        "was",
        "what",
        "with",
        "you",
        "your",
    ]
)
# ... and the words that follow "password is" / "token was" without being one ("is
# expired", "use --password to pass it")
_NOT_A_VALUE_EN = frozenset(
    [
        "accepted",
        "anything",
        "argument",
        "asks",
        "available",
        "blank",
        "broken",
        "case",
        "changed",
        "compromised",
        "correct",
        "default",
        "different",
        "elsewhere",
        "empty",
        "encrypted",
        "expects",
        "expired",
        "fine",
        "flag",
        "hashed",
        "incorrect",
        "instead",
        "invalid",
        "known",
        "leaked",
        "locked",
        "long",
        "means",
        "missing",
        "needed",
        "ok",
        "okay",
        "option",
        "prompts",
        "rejected",
        "required",
        "reset",
        "same",
        "saved",
        "sensitive",
        "set",
        "shared",
        "short",
        "something",
        "somewhere",
        "stored",
        "strong",
        "takes",
        "unknown",
        "valid",
        "weak",
        "whatever",
        "working",
        "wrong",
    ]
)
# ... and those words in German, after "Passwort ist" / "Kennwort lautet" ("ist nicht gut",
# "lautet anders", "ist abgelaufen")
_NOT_A_VALUE_DE = frozenset(
    [
        "abgelaufen",
        "aktuell",
        "alt",
        "anders",
        "bekannt",
        "das",
        "dasselbe",
        "der",
        "die",
        "dort",
        "ein",
        "eine",
        "falsch",
        "geheim",
        "gesperrt",
        "gleich",
        "gültig",
        "hier",
        "immer",
        "jetzt",
        "korrekt",
        "kurz",
        "lang",
        "leer",
        "mein",
        "nicht",
        "noch",
        "neu",
        "richtig",
        "schwach",
        "sicher",
        "stark",
        "unbekannt",
        "ungültig",
        "unsicher",
        "zurückgesetzt",
    ]
)
_NOT_A_VALUE = _FUNCTION_WORDS | _NOT_A_VALUE_EN | _NOT_A_VALUE_DE
# "the password is kept in a vault", "... is rotated every month": one lower-case word that
# reads as a participle (a real password is rarely one: "is swordfish on the prod box" is
# still masked), and after it one of these
_PROSE_NEXT = frozenset(
    [
        "on",
        "in",
        "at",
        "by",
        "every",
        "each",
        "from",
        "to",
        "with",
        "under",
        "behind",
        "into",
        "inside",
        "onto",
        "over",
        "via",
        "through",
        "within",
        "across",
        "after",
        "before",
        "during",
        "until",
        "once",
        "twice",
        "somewhere",
        "elsewhere",
        "daily",
        "weekly",
        "monthly",
        "yearly",
        "annually",
        "hourly",
        "quarterly",
        "regularly",
        "automatically",
        "periodically",
    ]
)
_PARTICIPLES = frozenset(
    [
        "kept",
        "set",
        "put",
        "sent",
        "left",
        "held",
        "built",
        "lost",
        "found",
        "shown",
        "known",
        "told",
        "sold",
        "stuck",
        "bound",
        "read",
        "spent",
        "shared",
        "stored",
        "saved",
        "handled",
        "managed",
    ]
)
# what follows "passphrase is <word>" in a sentence about it ("is wrong again", "is long
# enough"), where a pass phrase would go on with a noun ("is correct horse")
_CLAUSE_WORDS = frozenset(
    [
        "and",
        "or",
        "but",
        "so",
        "because",
        "since",
        "when",
        "if",
        "though",
        "although",
        "unless",
        "while",
        "as",
        "than",
        "then",
        "yet",
        "already",
        "again",
        "enough",
        "anyway",
        "anymore",
        "somehow",
        "either",
        "neither",
    ]
)
# the shell's working directory, not a password: PWD=/home/ana, OLDPWD=/tmp, {"PWD": "~/x"}
_PWD_NAME = re.compile(r"pwd[\s\"':=]*$", re.IGNORECASE)
_CLAUSE_END = re.compile(r"\s*(?:[.,;:!?)]|$)")
_NEXT_WORD = re.compile(r"\s+([A-Za-z]+)")


def _is_password_label(label: str) -> bool:
    return (
        not label.lower()
        .lstrip("_")
        .startswith(
            (
                "secret",
                "api",
                "access",
                "auth",
                "private",
                "token",
                "bearer",
                "client",
                "credential",
            )
        )
    )


def _labelled_secret(label: str, sep: str, value: str) -> bool:
    """Whether ``value`` after ``label`` is a secret: anything after ':' or '=' or in
    quotes, but after "is"/"was" only a word that is not ordinary prose ("the token is
    expired")."""
    if ":" in sep or "=" in sep or value[:1] in _QUOTES:
        return True
    word = value.rstrip(".!?,;:")  # the sentence's full stop is not the value's
    if word.lower() in _NOT_A_VALUE:
        return False
    looks_random = any(not c.isalpha() for c in word) or any(c.isupper() for c in word[1:])
    return looks_random or _is_password_label(label)


def _participle(word: str) -> bool:
    return word.endswith(("ed", "en")) or word in _PARTICIPLES


def _passphrase_prose(value: str) -> bool:
    """Whether the clause after "passphrase is" is a sentence about it, not the phrase."""
    words = value.lower().split()
    first, second = words[0], (words[1] if len(words) > 1 else "")
    if first in _NOT_A_VALUE:
        # "is correct horse ...": an adjective that begins a phrase, not one that ends it
        return (
            first in _FUNCTION_WORDS
            or not (second.isalpha() and len(second) >= 3)
            or second in _NOT_A_VALUE
            or second in _PROSE_NEXT
            or second in _CLAUSE_WORDS
            or second.endswith("ly")
        )
    return first.isalpha() and _participle(first) and second in _PROSE_NEXT


#: Words of a sentence about a password after "password is" ("reset yesterday afternoon",
#: "available upon request", "much longer", "one word"): times, amounts, comparisons,
#: prepositions and counts, which a pass phrase of plain words rarely holds.
_SAID_OF_A_PASSWORD = frozenset(
    {"yesterday", "today", "tomorrow", "tonight", "morning", "afternoon", "evening", "night",
     "week", "weeks", "month", "months", "year", "years", "day", "days", "soon", "later",
     "again", "anymore", "ago", "much", "more", "less", "longer", "shorter", "stronger",
     "weaker", "better", "worse", "enough", "quite", "rather", "upon", "per", "via",
     "without", "within", "after", "before", "until", "since", "during", "across", "through",
     "about", "like", "than", "one", "two", "three", "four", "five", "six", "seven", "eight",
     "nine", "ten", "single", "same", "different", "reset", "strong", "weak", "available",
     "invalid", "valid", "required", "optional", "secure", "insecure", "unknown", "wrong",
     "right", "simple", "easy", "hard", "temporary", "default", "empty", "blank", "fine",
     "ok", "okay", "good", "bad", "new", "old", "long", "short", "policy", "rules", "these",
     "those", "here", "there"}
)  # fmt: skip


def _progressive(word: str) -> bool:
    """An -ing form ("changing", "expiring"), which a sentence about a password opens with."""
    return len(word) > 4 and word.endswith("ing")


def _password_phrase_prose(value: str) -> bool:
    """Whether the words after "password is" say something of it ("is changed by IT every
    quarter", "is saved somewhere safe", "is case sensitive", "was reset yesterday") rather
    than being it: a participle, a function word, a word of a clause or place, an adverb,
    a word of time, amount or count (``_SAID_OF_A_PASSWORD``), or a word that describes a
    value (past the first of three or more: "correct horse ..." begins a phrase)."""
    words = value.lower().split()
    return (
        any(_participle(w) for w in words)
        or any(
            w in _FUNCTION_WORDS
            or w in _CLAUSE_WORDS
            or w in _PROSE_NEXT
            or w in _SAID_OF_A_PASSWORD
            or w.endswith("ly")
            for w in words
        )
        or any(w in _NOT_A_VALUE for w in words[1:])
        # two words: "is case sensitive"; three or more may begin "correct horse ..."
        or (len(words) == 2 and words[0] in _NOT_A_VALUE)
    )


def _kept_as_prose(m: re.Match[str]) -> bool:
    """Whether what a pattern matched is a sentence about a secret or a value that is not
    one (the working directory in PWD), rather than a secret to mask."""
    value = m.group("value")
    groups = m.groupdict()
    prefix = m.string[m.start(0) : m.start("value")]
    if value.strip("\"'").startswith(("/", "~")) and _PWD_NAME.search(prefix):
        return True
    if "sep" not in groups:
        return False
    if m.re is _PASSPHRASE_IS:
        return _passphrase_prose(value)
    label = groups.get("label") or "password"  # sshpass -p: a password, unnamed
    if not _labelled_secret(label, groups["sep"], value):
        return True
    connector = m.string[
        m.end("label") if groups.get("label") else m.start("value") : m.start("value")
    ]
    if value[:1] in _QUOTES or "=" in connector:
        return False
    word = value.rstrip(".!?")
    if ":" in connector:
        # "password: must be at least 12 characters": a clause about it, as ``_PASS_PHRASE``
        # reads what follows a colon (which keeps it whole), not a first word to mask
        after = _NEXT_WORD.match(m.string[m.end() :])
        return word.isalpha() and after is not None and _phrase_is_prose(f"{word} {after[1]}")
    plain = word.isalpha() and word.islower()
    rest = m.string[m.end() :]
    if plain and word == value:
        clause = re.split(r"[.!?;,\n]", rest, maxsplit=1)[0].lower().split()
        said_of_it = any(w in _SAID_OF_A_PASSWORD for w in clause)
        if word in _SAID_OF_A_PASSWORD or (_progressive(word) and said_of_it):
            return True  # "is much longer", "is one word", "is changing next week"
    if re.search(r"\bto\s*$", connector, re.IGNORECASE):
        # "changed to match the policy": a plain word there is a secret only ending the clause
        return plain and word == value and not _CLAUSE_END.match(rest)
    following = _NEXT_WORD.match(rest)
    return (
        plain
        and word == value
        and following is not None
        and following.group(1).lower() in _PROSE_NEXT
        and _participle(word)
    )


_CONTRACTION = re.compile(r"[A-Za-z]+['’][A-Za-z]+")


def _password_shaped(value: str) -> bool:
    """A value said with no ":" or "is" before it that can only be a password or a key:
    letters and digits (or symbols) mixed, and not a version or a file name ("sha256",
    "v2.4.1", "backup.tar")."""
    if value[:1] in _QUOTES:
        return True
    if _CONTRACTION.fullmatch(value):  # "can't", "won’t": a word, its apostrophe no symbol
        return False
    letters = sum(c.isalpha() for c in value)
    digits = sum(c.isdigit() for c in value)
    symbols = sum(not c.isalnum() and c not in "-_./:\\" for c in value)
    if not letters or re.fullmatch(r"[vV]?\d+(?:[._\-]\w+)*|[\w\-]+\.[a-z]{1,4}", value):
        return False
    mixed_case = any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    return symbols > 0 or (digits > 0 and (mixed_case or len(value) >= 8))


#: Words a clause after "password:" begins with when it is about the password.
_ABOUT_IT = frozenset(
    {"must", "should", "can", "cannot", "can't", "needs", "need", "has", "have", "is", "are",
     "was", "were", "will", "may", "might", "expires", "expired", "requires", "required",
     "see", "same", "none", "not", "too", "at"}
)  # fmt: skip


def _phrase_is_prose(value: str) -> bool:
    """Whether the clause after "password:" says something of it ("must be at least 12
    characters long") rather than being it."""
    words = value.split()
    return bool(words) and (words[0].lower() in _ABOUT_IT or _passphrase_prose(value))


def _asks_for_secret(text: str) -> bool:
    """Whether ``text`` (an assistant's message) ends asking for a password, a PIN or a
    code outright ("Please enter your password.", "And the PIN?")."""
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]
    return bool(sentences) and _ASKS_FOR_SECRET.match(sentences[-1]) is not None


def masked_reply(text: str, request: str) -> tuple[str, int, tuple[str, ...]]:
    """``text``, the user's reply to the assistant's ``request``, masked whole when the
    request asks for a secret outright and the reply is the secret itself, said with no
    name: one word of four characters or more, or for a pass phrase a few words. Returns
    the text, how many were masked, and the values to mask where the conversation repeats
    them (as ``mask_secrets``' ``found``: a password-shaped one only, "macOS" is a word)."""
    said = text.strip()
    words = said.split()
    phrase = _ASKS_FOR_PHRASE.search(request) is not None
    if len(said) < 4 or said.startswith("[secret") or not 1 <= len(words) <= (12 if phrase else 1):
        return text, 0, ()
    if not _asks_for_secret(request):
        return text, 0, ()
    return text.replace(said, MASK), 1, (said,) if _password_shaped(said) else ()


def _strong_password_shaped(value: str) -> bool:
    """``_password_shaped``, and more than a long word with a digit ("ec2-user",
    "min12chars"): a symbol, or digits in a word of both cases."""
    if not _password_shaped(value) or value[:1] in _QUOTES:
        return False
    symbols = any(not c.isalnum() and c not in "-_./:\\" for c in value)
    mixed_case = any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    return symbols or (any(c.isdigit() for c in value) and mixed_case)


def _login_password_shaped(value: str) -> bool:
    """After a user and "/" ("login is bob@x.com / Sunshine2024"): a password's shape, and
    not a user's ("log in as ubuntu / ec2-user": a word joined by "-", "_" or ".")."""
    joined = re.fullmatch(r"[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)+", value) is not None
    return _strong_password_shaped(value) or (_password_shaped(value) and not joined)


def _key_shaped(value: str) -> bool:
    """A value shaped as only a generated key or token is: 16 characters or more, at
    least four letters and four digits, and either both cases ("Zr8LqP2mX9vK4tW7") or
    letters past "f" (not a hex digest or id, which a commit hash is)."""
    letters = [c for c in value if c.isalpha()]
    if len(letters) < 4 or sum(c.isdigit() for c in value) < 4:
        return False
    mixed = any(c.isupper() for c in letters) and any(c.islower() for c in letters)
    return mixed or any(c.lower() > "f" for c in letters)


#: A product or a ticket, not a password: "1Password", "JIRA-4411", "PR#1234".
_NAMED_THING = re.compile(r"\d[A-Z][a-z]+|[A-Z]{2,}[-#]\d+")

#: Patterns whose value is masked only when it has the shape (in this order).
_SHAPED: tuple[tuple[re.Pattern[str], Callable[[str], bool]], ...] = (
    (_LABEL_THEN_VALUE, _password_shaped),
    (_LOGIN_PAIR, _password_shaped),
    (_CREDENTIALS_VALUE, lambda v: _password_shaped(v) and not _NAMED_THING.fullmatch(v)),
    (_LABEL_THEN_KEY, _key_shaped),
    (_LOGIN_WITH, _login_password_shaped),
    (_SECRET_NOW, _strong_password_shaped),
)


def _when_shaped(
    shape: Callable[[str], bool], masked_value: Callable[[re.Match[str]], str]
) -> Callable[[re.Match[str]], str]:
    """A replacement that masks a match's value when it has ``shape``, else keeps it."""
    return lambda m: masked_value(m) if shape(m.group("value")) else m.group(0)


#: The last word of a key whose value may be a pass phrase, with spaces in it.
_PHRASE_KEYS = frozenset({"password", "passwd", "passphrase", "pass", "pwd", "pw"})


def _phrase_follows(m: re.Match[str]) -> bool:
    """Whether a config line's value (``_CONFIG_LINE``, one word) is the first word of a
    pass phrase ("password: purple monkey dishwasher"): the key names a password, the value
    is unquoted and more words follow on its line. Then ``_PASS_PHRASE`` masks it whole,
    which it cannot do once its first word is masked."""
    words = [w.lower() for w in _KEY_WORD.findall(m.group("key"))]
    if not words or words[-1] not in _PHRASE_KEYS or m.group("value")[:1] in _QUOTES:
        return False
    rest = m.string[m.end() :].split("\n", 1)[0]
    return re.match(r"[ \t]+[^\s#]", rest) is not None


def _config_secret(m: re.Match[str]) -> bool:
    """Whether a config line's value is a secret by its key (``_CONFIG_LINE``): a key with
    a secret's word in it, ending with one ("db_password", "apiToken") or followed by a
    value shaped like a password ("secret_key_base: 3b8f..."); not a key about the secret
    ("password_min_length"), a flag, a path or a small number."""
    key, value = m.group("key"), m.group("value").strip("\"'")
    words = [w.lower() for w in _KEY_WORD.findall(key)]
    if not words or not _SECRET_WORDS.intersection(words) or _ABOUT_THE_SECRET.search(key):
        return False
    if _TIME_FIELD.search(key):
        return False
    lowered = value.lower()
    if lowered in ("null", "nil", "true", "false", "~", "yes", "no") or lowered in _NOT_A_VALUE:
        return False
    if value.startswith(("/", "~", "[secret")) or re.fullmatch(r"\d{1,5}", value):
        return False  # a path, or a port or a count
    quoted = m.group("value")[:1] in _QUOTES
    named = words[-1] in _SECRET_WORDS and words[-1] not in ("auth", "credential", "credentials")
    return named or quoted or _password_shaped(value)


def _indentation(text: str, start: int, end: int) -> int:
    line = text[start:end]
    return len(line) - len(line.lstrip(" \t"))


def _lines_after(text: str, pos: int) -> Iterable[tuple[int, int]]:
    """The (start, end) of each line after the one ``pos`` is on."""
    newline = text.find("\n", pos)
    while newline >= 0:
        start = newline + 1
        newline = text.find("\n", start)
        yield start, len(text) if newline < 0 else newline


def _plain_end(text: str, start: int, line_end: int) -> int:
    """Where a plain (unquoted) YAML value from ``start`` ends on its line: before a
    comment, the next key or list item, a flow comma before a key, a bracket closing a
    collection the value did not open, and on the text's last line the end of its clause."""
    stop = _PLAIN_END.search(text, start, line_end)
    end = stop.start() if stop else line_end
    if line_end == len(text):
        clause = _VALUE_CLAUSE_END.search(text, start, end)
        end = clause.start() if clause else end
    depth = 0
    for i in range(start, end):
        if text[i] in "{[":
            depth += 1
        elif text[i] in "}]":
            if not depth:
                return i
            depth -= 1
    return end


def _continued(text: str, end: int, indent: int, block: bool) -> tuple[int, int] | None:
    """The lines after ``end`` that go on a value, more indented than its key's line
    (``indent``): a block scalar's (``block``: any line, blank ones between), or a plain
    value's (no key, list item or comment; to a comment or the next key in one); the start of
    the first and the end of the last, or None for none."""
    span: tuple[int, int] | None = None
    for start, line_end in _lines_after(text, end):
        if not text[start:line_end].strip():
            if block:
                continue
            break
        if _indentation(text, start, line_end) <= indent:
            break
        if not block and _NOT_CONTINUATION.match(text, start, line_end):
            break
        content = start + _indentation(text, start, line_end)
        last = line_end if block else _plain_end(text, content, line_end)
        span = (span[0] if span else content, last)
        if last < line_end:
            break
    return span


def _named_value_span(text: str, start: int) -> tuple[int, int] | None:
    """The value of a name/value entry naming a secret (``_NAMED_VALUE``), from ``start``
    (after "value:"), as YAML reads it: a quoted one (in its quotes); a block scalar
    ("|", ">-", ...: the lines indented under it); a plain one to the end of its line (see
    ``_plain_end``) and the lines indented under it that go on with it. None for a value that
    is not a string (a list or a mapping) or for none."""
    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end
    line_start = text.rfind("\n", 0, start) + 1
    indent = _indentation(text, line_start, line_end)
    first = text[start : start + 1]
    if first and first in "\"'":
        quoted = (_DOUBLE_QUOTED if first == '"' else _SINGLE_QUOTED).match(text, start, line_end)
        if quoted:
            return quoted.span(1)
    if _BLOCK_HEADER.match(text, start, line_end):
        return _continued(text, line_end, indent, block=True)
    if _BLANK.match(text, start, line_end) or first == "#":
        return _continued(text, line_end, indent, block=False)  # the value under its key
    if first in "[{" or _LIST_ITEM.match(text, start, line_end):
        return None  # a collection or a list: not a string
    collapsed_block = _COLLAPSED_BLOCK.match(text, start, line_end)
    if collapsed_block:
        start = collapsed_block.end()  # "value: | Zk9pqrW1": a block with its newlines collapsed
    end = _plain_end(text, start, line_end)
    if end == line_end < len(text):
        more = _continued(text, line_end, indent, block=False)
        end = more[1] if more else end
    end = start + len(text[start:end].rstrip())
    return (start, end) if end > start else None


def _named_value_spans(text: str) -> list[tuple[int, int]]:
    """The values of the name/value entries in ``text`` that name a secret."""
    spans: list[tuple[int, int]] = []
    for m in _NAMED_VALUE.finditer(text):
        if spans and m.start() < spans[-1][1]:
            continue
        span = _named_value_span(text, m.end())
        if span is not None:
            spans.append(span)
    return spans


def _masked_spans(
    text: str, spans: Sequence[tuple[int, int]], found: list[str] | None
) -> tuple[str, int]:
    """``text`` with the values at ``spans`` masked (not one masked already), and how many
    were; ``found`` collects them as a message keeps them (its whitespace collapsed) and,
    single-quoted, as a reply would quote them ("it''s" is "it's")."""
    parts, done, count = [], 0, 0
    for start, end in spans:
        value = text[start:end]
        if value.startswith("[secret"):
            continue
        count += 1
        if found is not None:
            found.append(" ".join(value.split()))
            if text[start - 1 : start] == "'" and "''" in value:
                found.append(value.replace("''", "'"))
        parts += [text[done:start], MASK]
        done = end
    return "".join([*parts, text[done:]]), count


def _card_number(text: str) -> bool:
    """Whether ``text`` is a payment card's number: a card network's first digits, and a
    last digit that is the Luhn check of the rest (one random run of digits in ten)."""
    digits = [int(c) for c in text if c.isdigit()]
    first = int("".join(map(str, digits[:4])))
    if not any(low <= first <= high for low, high in _CARD_NETWORKS):
        return False
    total = 0
    for place, digit in enumerate(reversed(digits)):
        if place % 2:
            digit *= 2
            digit -= 9 if digit > 9 else 0
        total += digit
    return total % 10 == 0


def _random_looking(token: str) -> bool:
    mixed = any(c.islower() for c in token) and any(c.isupper() for c in token)
    if len(token) == 40 and any(c.isdigit() or c in "/+" for c in token):
        return mixed  # the shape of an AWS secret access key
    return mixed and sum(c.isdigit() for c in token) >= 3


def mask_secrets(
    text: str, *, random_looking: bool = True, found: list[str] | None = None
) -> tuple[str, int]:
    """``text`` with what looks like a secret replaced by ``MASK``, and how many were
    (``random_looking=False``: not the long random-looking strings, which ids can be).
    ``found``, when given, collects the values masked."""
    if not text:
        return text, 0
    if len(text) <= _REMEMBERED_CHARS:
        masked, count, values = _masked_remembered(text, random_looking)
    else:
        masked, count, values = _masked(text, random_looking)
    if found is not None:
        found.extend(values)
    return masked, count


#: Texts up to this long have their masking remembered (``_masked_remembered``).
_REMEMBERED_CHARS = 4000


@functools.lru_cache(maxsize=1024)
def _masked_remembered(text: str, random_looking: bool) -> tuple[str, int, tuple[str, ...]]:
    """``_masked``, remembered for the last texts masked: every turn masks the thread's
    history again to know which exchanges the prompt already shows (83% of that work was
    masking the same messages as the turn before: 3.4 ms a turn for twenty messages). The
    texts are the process's own recent messages, which the graph's state holds too."""
    return _masked(text, random_looking)


def _masked(text: str, random_looking: bool) -> tuple[str, int, tuple[str, ...]]:
    """``text`` masked, how many secrets were, and the values masked."""
    count = 0
    found: list[str] = []

    def masked(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        found.append(m.group(0))
        return MASK

    def masked_value(m: re.Match[str]) -> str:
        nonlocal count
        value = m.group("value")
        if value.startswith("[secret") or _kept_as_prose(m):
            return m.group(0)
        count += 1
        found.append(value)
        # the sentence's full stop or comma after an unquoted value stays the sentence's
        end = m.end("value")
        kept = len(value) - len(value.rstrip(".,;:"))
        if (
            value[:1] in _QUOTES
            or kept == len(value)
            or m.string[end : end + 1] not in ("", " ", "\n")
        ):
            kept = 0
        return m.group(0)[: m.start("value") - m.start(0)] + MASK + value[len(value) - kept :]

    text = _KNOWN_FORMATS.sub(masked, text)
    text = _CARD_NUMBER.sub(lambda m: masked(m) if _card_number(m.group(0)) else m.group(0), text)
    text = _CARD_CODE.sub(masked_value, text)
    text = _URL_PASSWORD.sub(masked_value, text)
    text = _ENV_SECRET.sub(masked_value, text)
    text = _CONFIG_LINE.sub(
        lambda m: masked_value(m) if _config_secret(m) and not _phrase_follows(m) else m.group(0),
        text,
    )
    for pattern in (
        _QUOTED_SECRET,
        _BARE_SECRET,
        _TAGGED_SECRET,
        _ATTRIBUTE_SECRET,
        _KEYED_ELEMENT,
    ):
        text = pattern.sub(masked_value, text)
    text, named = _masked_spans(text, _named_value_spans(text), found)
    count += named
    for pattern in (
        _VALUE_THEN_NAME,
        _NETRC,
        _USER_PASSWORD,
        _CREDENTIALS,
        _RECOVERY_CODES,
        _PIN,
        _HTPASSWD,
        _OPENSSL,
        _MYSQL_PASSWORD,
        _SSHPASS,
        _CURL_USER,
        _SMB_USER,
        *_COMMAND_PASSWORDS,
    ):
        text = pattern.sub(masked_value, text)
    # before "password=" takes the rest of the clause: "--password=X --verbose" keeps its flag
    text = _FLAG_PASSWORD.sub(masked_value, text)
    # "password: must be at least 12 characters long" is about the password: kept whole
    text = _PASS_PHRASE.sub(
        lambda m: m.group(0) if _phrase_is_prose(m.group("value")) else masked_value(m), text
    )
    text = _PASSWORD_PHRASE_IS.sub(
        lambda m: m.group(0) if _password_phrase_prose(m.group("value")) else masked_value(m),
        text,
    )
    text = _PASSPHRASE_IS.sub(masked_value, text)
    text = _LABELLED.sub(masked_value, text)
    text = _LABELLED_LATER.sub(masked_value, text)
    text = _CHANGED_TO.sub(masked_value, text)
    text = _LABEL_THEN_QUOTED.sub(masked_value, text)
    text = _OTP_SEED.sub(masked_value, text)
    text = _SEED_PHRASE.sub(masked_value, text)
    # values masked only when their shape says they are one
    for shaped, shape in _SHAPED:
        text = shaped.sub(_when_shaped(shape, masked_value), text)
    if not random_looking:
        return text, count, tuple(found)
    text = _RANDOM.sub(lambda m: masked(m) if _random_looking(m.group(0)) else m.group(0), text)
    return text, count, tuple(found)


def recurring_secrets(found: Iterable[str]) -> list[str]:
    """Of the values ``mask_secrets`` masked (its ``found``), those to mask wherever the
    same conversation repeats them (a reply quoting the password back, the key pasted again
    later), longest first. Only values that cannot be an ordinary word: "password: reset"
    masks "reset" there, not every "reset" of the conversation."""
    values = set()
    for value in found:
        value = value.strip("\"'“”‘’").strip()
        # as a reply quotes it: without the sentence's full stop ("is Xy7kL9qZ."), and a
        # clause taken whole after "password:" by its first word ("Tr0ub4dor3 stopped
        # working") when that word is password-shaped (not "Can't", "iPhone" or "2024")
        values |= {value, value.rstrip(".,;:!?")}
        first = value.split(" ", 1)[0].rstrip(".,;:!?")
        if " " in value and _password_shaped(first):
            values.add(first)
    kept = [
        value
        for value in values
        if len(value) >= 4
        and MASK not in value
        and (not value.isalpha() or any(c.isupper() for c in value[1:]))
    ]
    return sorted(kept, key=len, reverse=True)


def mask_known(text: str, values: Sequence[str]) -> tuple[str, int]:
    """``text`` with every occurrence of the secret ``values`` (``recurring_secrets``) masked,
    and how many were."""
    count = 0
    for value in values:
        if value in text:
            count += text.count(value)
            text = text.replace(value, MASK)
    return text, count


# A metadata field whose name says it holds a secret ("api_key", "password", "authToken").
_SECRET_FIELD = re.compile(
    r"pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key"
    r"|credential|authorization|cookie",
    re.IGNORECASE,
)
# ... or a short one: "pw", "auth", "db_pw", "basic_auth", "proxyAuth" ("author",
# "auth_method", "oauth" are not)
_SHORT_SECRET_FIELD = re.compile(r"^(?i:pw|auth)$|[_.\-](?i:pw|auth)$|[a-z](?:Pw|PW|Auth|AUTH)$")
# ... but not a time: "pwd_changed_at", "tokenExpiresAt" hold when, not what
_TIME_FIELD = re.compile(r"[_.\-](?i:at)$|[a-z]At$")


def _secret_field(key: str) -> bool:
    if _TIME_FIELD.search(key):
        return False
    return bool(_SECRET_FIELD.search(key) or _SHORT_SECRET_FIELD.search(key))


# what a field named like a secret holds when it is about one: a count ("total_tokens":
# 1532, a model's usage), a yes/no, or under an "auth" name the name of a scheme
# ("auth": "oauth2"; a password field's "password" is a password)
_SCHEMES = frozenset(
    [
        "basic",
        "bearer",
        "digest",
        "oauth",
        "oauth1",
        "oauth2",
        "jwt",
        "none",
        "ntlm",
        "kerberos",
        "negotiate",
        "hmac",
        "apikey",
        "api_key",
        "sso",
        "saml",
        "oidc",
        "mtls",
    ]
)


def _about_a_secret(key: str, item: Any) -> bool:
    if isinstance(item, bool) or _ABOUT_THE_SECRET.search(key):
        return True
    if isinstance(item, int | float) and re.search(r"(?i:tokens)$|[a-z]Tokens$", key):
        return True
    named_auth = re.search(r"(?i:auth)", key) is not None
    return named_auth and isinstance(item, str) and item.strip().lower() in _SCHEMES


def _entry_name(entry: Mapping[Any, Any]) -> str | None:
    """The name of a name/value entry (Kubernetes' env ``{"name": "DB_PASSWORD", "value":
    ...}``, AWS's ``{"Key": ..., "Value": ...}``): its value is masked as a field of that
    name would be."""
    names = (v for k, v in entry.items() if str(k).lower() in ("name", "key"))
    return next((v for v in names if isinstance(v, str)), None)


def mask_metadata(value: Any, found: list[str] | None = None) -> tuple[Any, int]:
    """A message's metadata with its secrets masked, and how many were: the whole value of
    a field named like a secret, or of an entry's ``value`` whose ``name`` or ``key`` names
    one (not a count, a flag or a scheme's name there: see ``_about_a_secret``), and
    secrets of known shapes inside other text (not long random-looking strings: message
    ids look like that). ``found``, when given, collects the values masked: the message's
    words may repeat them."""
    if isinstance(value, Mapping):
        out, count = {}, 0
        named = _entry_name(value)
        for key, item in value.items():
            field = named if named is not None and str(key).lower() == "value" else str(key)
            if (
                _secret_field(field)
                and item not in (None, "", [], {})
                and not _about_a_secret(field, item)
            ):
                out[key], count = MASK, count + 1
                if found is not None and isinstance(item, str | int):
                    found.append(str(item))
            else:
                out[key], inside = mask_metadata(item, found)
                count += inside
        return out, count
    if isinstance(value, list):
        items = [mask_metadata(item, found) for item in value]
        return [item for item, _ in items], sum(inside for _, inside in items)
    if isinstance(value, str):
        return mask_secrets(value, random_looking=False, found=found)
    return value, 0
