"""Instructions in the European languages the English reader does not read: French, Spanish, German.

The English reader reads instructions by their form (memory/instructions.py); in these languages
the user's own cue words say it, under the same tests:

- a question or a one-off ("pour l'instant", "por ahora", "vorerst") is never an instruction;
- said plainly: a request to keep something in memory or CLAUDE.md ("retiens que …", "recuerda
  que …", "merk dir …"), "from now on" ("désormais", "a partir de ahora", "ab jetzt"), a sentence
  that opens on always or never ("toujours …", "nunca …", "verwende nie …"), "I prefer …";
- said once: an imperative with a lasting scope ("… pour que la prochaine fois tu …", "cada vez",
  "jedes Mal"), and what the user wants of a named thing ("j'aimerais que le log global ait …").

People often leave the accents out ("desormais", "a chaque debut de session"): each pattern takes
both. A sentence is read in the language most of its words are, when enough are (words a language
shares with English are not counted); what is in brackets is often quoted English and is not
counted either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


@dataclass(frozen=True)
class Language:
    name: str
    words: frozenset[str]  # its own common words: how a sentence is known to be in it
    lead_in: re.Pattern[str]  # words before the instruction that change nothing ("ok", "et", "bueno")
    question: re.Pattern[str]
    one_off: re.Pattern[str]
    keep: re.Pattern[str]  # said of memory itself
    from_now: re.Pattern[str]
    always_never: re.Pattern[str]
    prefer: re.Pattern[str]
    scope: re.Pattern[str]  # a lasting scope said anywhere: "la prochaine fois", "cada vez"
    imperative: re.Pattern[str]
    want_thing: re.Pattern[str]


@dataclass(frozen=True)
class Cued:
    """An instruction a sentence gives in its language's cue words."""

    kind: str  # rule, decision or preference
    clause: str  # the clause that gives it
    plain: bool  # said plainly; else said once


FRENCH = Language(
    name="French",
    words=frozenset("""le la les des du une est pour que qui pas avec dans sur ça ca tu je mais aux au cette ces fois chaque
        toujours jamais ne fais faire il elle nous vous mon ma mes ton ta tes ce cet sont était etait aussi plus très
        tres quand comme désormais desormais dorénavant dorenavant prochaine""".split()),  # fmt: skip
    lead_in=_re(r"^(?:(?:ok|oui|et|aussi|alors|donc|stp|s'il te pla[iî]t|en fait|du coup|bon)[,\s]+)+"),
    question=_re(r"\?\s*$|^(?:est-ce que|pourquoi|comment|quel(?:le)?s?|combien|o[uù] )"),
    one_off=_re(r"\b(?:pour l'?instant|pour le moment|cette fois(?:-ci)?|aujourd'?hui)\b"),
    keep=_re(r"^(?:retiens|souviens[- ]toi|garde en m[ée]moire)\b|^(?:mets?|met|modifie|ajoute|[ée]cris|enregistre|note|"
             r"sauvegarde)\b[^.?!]{0,40}?(?:claude\.md|agents\.md|\b(?:ta|la) m[ée]moire)"),  # fmt: skip
    from_now=_re(r"\b(?:d[ée]sormais|dor[ée]navant|[àa] partir de maintenant|[àa] l'avenir)\b"),
    always_never=_re(r"^(?:toujours|ne jamais|jamais)\b|^(?:ne |n')\w+ jamais\b|^(?:il faut|tu dois|on doit) (?:toujours|jamais)\b"),
    prefer=_re(r"^(?:je pr[ée]f[èe]re|on pr[ée]f[èe]re)\b"),
    scope=_re(r"\b(?:la prochaine fois|les prochaines fois|(?:[àa] )?chaque fois|(?:[àa]|en) chaque (?:d[ée]but de )?session|"
              r"toujours|jamais)\b"),  # fmt: skip
    imperative=_re(r"^(?:mets?|met|modifie|ajoute|utilise|fais|garde|v[ée]rifie|[ée]cris|supprime|lance|commite?|"
                   r"mets? [àa] jour|met a jour|n'|ne )"),  # fmt: skip
    want_thing=_re(r"^(?:j'aimerais|je voudrais|je veux|il faudrait|il faut)\s+que\s+"
                   r"(?:le|la|les|l'|mon|ma|mes|notre|nos|chaque|tout|tous)\s*\w"),  # fmt: skip
)

SPANISH = Language(
    name="Spanish",
    words=frozenset("""el los las del una unos unas para por con pero como cuando siempre nunca también tambien muy
        más mas ahora esto eso este esta estos estas hay cada desde sin sobre mi mis tus nosotros haz usa usar hacer
        próxima proxima vez favor está estan están porque puedes quiero necesito""".split()),  # fmt: skip
    lead_in=_re(r"^(?:(?:ok|vale|s[ií]|y|tambi[ée]n|entonces|bueno|pues|por favor)[,\s]+)+"),
    question=_re(r"\?\s*$|^¿|^(?:por ?qu[ée]|c[oó]mo|qu[ée]|cu[aá]l(?:es)?|cu[aá]nto|d[oó]nde|puedes|podr[ií]as) "),
    one_off=_re(r"\b(?:por ahora|por el momento|de momento|esta vez|hoy)\b"),
    keep=_re(r"^(?:recuerda|acu[ée]rdate|record[aá]|memoriza|guarda en (?:tu|la) memoria)\b|^(?:pon|agrega|a[ñn]ade|escribe|"
             r"guarda|actualiza|modifica|anota)\b[^.?!]{0,40}?(?:claude\.md|agents\.md|\b(?:tu|la) memoria)"),  # fmt: skip
    from_now=_re(r"\b(?:a partir de ahora|de ahora en adelante|desde ahora|en adelante)\b"),
    always_never=_re(r"^(?:siempre|nunca|jam[aá]s)\b|^no\s+\w+\s+nunca\b|^(?:hay que|tienes que|debes) (?:siempre|nunca)\b"),
    prefer=_re(r"^(?:prefiero|preferimos)\b"),
    scope=_re(r"\b(?:la pr[oó]xima vez|las pr[oó]ximas veces|cada vez|siempre|nunca|en cada sesi[oó]n)\b"),
    imperative=_re(r"^(?:usa|utiliza|pon|agrega|a[ñn]ade|haz|guarda|verifica|comprueba|escribe|elimina|borra|ejecuta|"
                   r"actualiza|revisa|no )"),  # fmt: skip
    want_thing=_re(r"^(?:quiero|quisiera|me gustar[ií]a|necesito)\s+que\s+(?:el|la|los|las|mi|mis|nuestro|nuestra|cada|todo|todos)\s+\w"),
)

# German imperatives, for "verwende nie …" (the always or never after the verb) and the scoped ones.
_DE_IMPERATIVE = (r"nutze|verwende|benutze|mach|mache|schreib|schreibe|f[üu]ge|pr[üu]fe|l[öo]sche|f[üu]hre|aktualisiere|"
                  r"speichere|committe|teste|achte|halte|lass|gib|frag|frage|pushe?")  # fmt: skip
GERMAN = Language(
    name="German",
    words=frozenset("""der das den dem des ein eine einen einem ist sind und nicht mit für fur auf aus bei nach von zu zum
        zur auch immer nie niemals bitte wenn dann noch schon ich du wir ihr mein dein unser kein keine jetzt sich
        wird werden haben hat dass oder aber nur""".split()),  # fmt: skip
    lead_in=_re(r"^(?:(?:ok|okay|ja|und|also|auch|bitte|gut|na ja)[,\s]+)+"),
    question=_re(r"\?\s*$|^(?:warum|wieso|weshalb|wie|was|wo|wann|welche[rsnm]?|wer|kannst du|k[öo]nntest du|gibt es) "),
    one_off=_re(r"\b(?:vorerst|f[üu]rs erste|f[üu]r jetzt|diesmal|dieses mal|heute|vorl[äa]ufig)\b"),
    keep=_re(r"^(?:merk dir|merke dir|speichere? (?:dir|in deinem ged[äa]chtnis|im ged[äa]chtnis))\b|^(?:schreib|schreibe|trag|"
             r"trage|f[üu]ge|erg[äa]nze|aktualisiere|notiere)\b[^.?!]{0,40}?(?:claude\.md|agents\.md|\b(?:dein|im) ged[äa]chtnis)"),  # fmt: skip
    from_now=_re(r"\b(?:ab jetzt|von nun an|ab sofort|k[üu]nftig|zuk[üu]nftig|in zukunft)\b"),
    always_never=_re(rf"^(?:immer|nie|niemals)\b|^(?:{_DE_IMPERATIVE})\s+(?:\S+\s+)?(?:immer|nie|niemals)\b"),
    prefer=_re(r"^(?:ich bevorzuge|wir bevorzugen)\b"),
    scope=_re(r"\b(?:das n[äa]chste mal|n[äa]chstes mal|jedes ?mal|immer|nie|niemals|in jeder sitzung|bei jeder sitzung)\b"),
    imperative=_re(rf"^(?:{_DE_IMPERATIVE})\b"),
    want_thing=_re(r"^(?:ich m[öo]chte|ich will|ich h[äa]tte gern),?\s+dass\s+(?:der|die|das|mein|meine|unser|unsere|jeder|jede|"
                   r"jedes|alle)\s+\w"),  # fmt: skip
)

LANGUAGES = (FRENCH, SPANISH, GERMAN)

# What is in brackets is often quoted ("(last hour, last day)"): it says nothing of the sentence's language.
_IN_BRACKETS = re.compile(r"\([^()]*(?:\([^()]*\)[^()]*)*\)")
_WORD = re.compile(r"[a-zàáâäçéèêëíîïñóôöúûùüÿœß']+")


def language_of(text: str) -> Language | None:
    """The language a sentence is written in, of these, or None for English (and anything else): at
    least three of its own words and a quarter of all the sentence's words; or, a sentence too short for
    that, one that opens on the language's own words for keep, from now on, always or never ("nunca
    hagas push a main", "merk dir, dass …")."""
    words = _WORD.findall(_IN_BRACKETS.sub(" ", text).lower())
    best, best_count = None, 0
    for language in LANGUAGES:
        count = sum(word in language.words for word in words)
        if len({w for w in words if w in language.words}) >= 3 and count * 4 >= len(words) and count > best_count:
            best, best_count = language, count
    if best is None:
        for language in LANGUAGES:
            core = language.lead_in.sub("", text.strip())
            if language.keep.match(core) or language.from_now.match(core) or language.always_never.match(core):
                return language
    return best


def cued_instruction(text: str, language: Language) -> Cued | None:
    """The instruction a sentence in `language` gives, if any: the whole sentence, then each clause
    after a comma ("la vraie url est …, modifie le prompt pour … la prochaine fois")."""
    if language.question.search(text) or (language.one_off.search(text) and not language.from_now.search(text)):
        return None
    for clause in [text, *re.split(r"[,;]\s*", text)[1:]]:
        core = language.lead_in.sub("", clause).strip()
        if language.keep.search(core) or language.from_now.search(core) or language.always_never.search(core):
            return Cued("rule", clause, plain=True)
        if language.prefer.search(core):
            return Cued("preference", clause, plain=True)
        if language.scope.search(core) and language.imperative.search(core):
            return Cued("rule", clause, plain=False)
        if language.want_thing.search(core):
            return Cued("decision", clause, plain=False)
    return None
