#!/usr/bin/env python
"""Does the judge ACCEPT hits of requests the store has no answer to? (about 6 minutes)

    python bench/judge_irrelevant.py [--old REV] [--cv] [--json OUT]

Relevant queries: LoCoMo dev questions (categories 1-4) over their conversation
(one memory per turn) and CMRC 2018 dev questions over the pool of paragraph
chunks (bench/quality.py loads both; the data is read in place from
``../shared/data``, never copied). Irrelevant queries: everyday requests to an
agent that no memory answers (:func:`irrelevant_queries`: English and Chinese,
from templates, with a fixed seed), run against the same stores, a mixed store
(every LoCoMo turn and every CMRC chunk) and a store shaped like the session 39
MCP user simulation's (CMRC chunks under their article's title, LoCoMo
observations) and one of every LoCoMo turn prefixed with its session's date (numbers
beside dates). The 40 queries of that simulation (:data:`HELD_OUT`) and the 155 broader
requests of bench/judge_broad.py (:func:`broad`: arithmetic, speakers' names, Chinese
terms holding a shorter word, stored titles with a character changed, everyday requests;
session 41) are separate checks, never used to choose a rule or a threshold
(bench/judge_rules_cv.py chose session 41's rules on the templates). Every memory
declares a verification basis (``data``), so the judge itself says ACCEPT and
only the search's evidence rules (filler, common words, thin evidence) can
make a hit DEFER.

Printed, for the judge of this checkout (``new``) and of ``--old`` (default
:data:`OLD`, the judge before session 39: a ``git archive`` of it is imported in
a second process), in the same run:

* relevant: the share of questions whose first result is an answer (gold) and
  ACCEPT, and an answer and DEFER; whose answers in the top 10 include an ACCEPT
  one; whose ``inject`` items include an answer;
* irrelevant, held out and broad: the share of queries with at least one ACCEPT hit
  in the top 10, and with at least one ``inject`` item.

``--cv`` also chooses :data:`md_cg.search.THIN_SHARE` and ``THIN_SHARE_ONE`` by
cross-validation: five folds (LoCoMo: the conversations; CMRC: article groups,
bench/quality.py; irrelevant queries: their template), each threshold pair chosen
on four folds by the irrelevant queries' ACCEPT share plus ``lambda`` times the
share of relevant questions whose first answer it defers, reported on the fifth.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import judge_broad
import quality

REPO = Path(__file__).resolve().parent.parent
#: The judge before session 39.
OLD = "cb5d5fb"

# ------------------------------------------------------------ irrelevant queries

#: Templates of everyday requests to an agent (English), each with its slots' values.
EN_TEMPLATES: tuple[tuple[str, dict[str, tuple[str, ...]]], ...] = (
    (
        "how do I {action} on my {device}",
        {
            "action": ("update the firmware", "clear the cache", "turn off autoplay", "enable dark mode"),
            "device": ("printer", "laptop", "smart tv", "android phone", "thermostat", "smartwatch"),
        },
    ),
    (
        "what's the weather forecast for {city} this {when}",
        {
            "city": ("Oslo", "Nairobi", "Lima", "Osaka", "Denver", "Krakow", "Brisbane"),
            "when": ("weekend", "afternoon", "Friday"),
        },
    ),
    (
        "convert {n} {unit}",
        {
            "n": ("3", "12", "250"),
            "unit": (
                "miles to km",
                "pounds to kilograms",
                "fahrenheit to celsius",
                "cups to milliliters",
                "gallons to liters",
                "inches to centimeters",
            ),
        },
    ),
    (
        "remind me to {task} at {time}",
        {
            "task": (
                "call the plumber",
                "renew my car insurance",
                "water the ficus",
                "submit the expense report",
                "pick up the dry cleaning",
            ),
            "time": ("9am tomorrow", "noon", "6 pm on Monday"),
        },
    ),
    (
        "write a {lang} function that {task}",
        {
            "lang": ("Python", "JavaScript", "Go", "Rust", "Bash"),
            "task": (
                "parses a CSV file",
                "reverses a linked list",
                "validates an email address",
                "retries an HTTP request with backoff",
                "merges two sorted arrays",
            ),
        },
    ),
    (
        "why does {tool} say {error}",
        {
            "tool": ("npm", "docker", "git", "pip", "cargo", "gradle"),
            "error": (
                "permission denied",
                "no space left on device",
                "certificate verify failed",
                "port already in use",
                "detached HEAD",
            ),
        },
    ),
    (
        "what is the capital of {country}",
        {"country": ("Paraguay", "Latvia", "Botswana", "Laos", "Uruguay", "Slovenia", "Jordan")},
    ),
    (
        "how many calories are in {food}",
        {"food": ("a bagel", "an avocado", "a slice of cheesecake", "a banana", "a bowl of ramen")},
    ),
    (
        "book a table for {n} at a {cuisine} restaurant {when}",
        {
            "n": ("two", "four", "six"),
            "cuisine": ("Thai", "Ethiopian", "Peruvian", "Korean BBQ", "vegan"),
            "when": ("tonight", "on Saturday"),
        },
    ),
    (
        "what time does the {place} close today",
        {"place": ("pharmacy", "post office", "hardware store", "DMV", "public library")},
    ),
    (
        "summarize the latest news about {topic}",
        {
            "topic": (
                "semiconductor tariffs",
                "the central bank",
                "electric scooters",
                "the housing market",
                "solar panels",
            )
        },
    ),
    (
        "explain {concept} in simple terms",
        {
            "concept": (
                "gradient descent",
                "the Krebs cycle",
                "compound interest",
                "public key cryptography",
                "blockchain consensus",
            )
        },
    ),
    ("set a timer for {n} minutes", {"n": ("5", "12", "25", "45")}),
    (
        "what's a good gift for a {person} who likes {hobby}",
        {
            "person": ("coworker", "nephew", "grandmother"),
            "hobby": ("chess", "model trains", "birdwatching", "origami"),
        },
    ),
    ("how long should I boil {food}", {"food": ("eggs", "brown rice", "quinoa", "corn on the cob")}),
    (
        "schedule a meeting with {name} about {topic} next {day}",
        {
            "name": ("Priya", "Tomasz", "Keiko", "Ahmed", "Lucia"),
            "topic": ("the Q3 budget", "the vendor contract", "onboarding", "the API migration"),
            "day": ("Tuesday", "Thursday"),
        },
    ),
    (
        "what's the exchange rate from {pair}",
        {"pair": ("USD to JPY", "EUR to GBP", "CAD to MXN", "CHF to SEK")},
    ),
    (
        "find me a {item} under {price} dollars",
        {
            "item": ("standing desk", "espresso grinder", "hiking backpack", "4k monitor", "air purifier"),
            "price": ("200", "500"),
        },
    ),
    (
        "is it safe to take {drug} with {other}",
        {
            "drug": ("ibuprofen", "acetaminophen", "melatonin"),
            "other": ("antihistamines", "aspirin", "coffee"),
        },
    ),
    (
        "how do I cancel my {what} subscription",
        {"what": ("gym", "streaming", "newspaper", "cloud storage", "meal kit")},
    ),
    (
        "what does error code {code} mean on {thing}",
        {
            "code": ("E24", "F05", "0x80070005", "P0420"),
            "thing": ("a washing machine", "windows update", "a car dashboard", "a boiler"),
        },
    ),
    (
        "draft an email to my landlord about {issue}",
        {
            "issue": (
                "a leaking faucet",
                "a broken heater",
                "late rent",
                "noisy neighbours",
                "mold in the bathroom",
            )
        },
    ),
)

#: Templates of everyday requests to an agent (Chinese).
ZH_TEMPLATES: tuple[tuple[str, dict[str, tuple[str, ...]]], ...] = (
    ("{city}明天天气怎么样", {"city": ("乌鲁木齐", "厦门", "昆明", "哈尔滨", "青岛", "拉萨")}),
    (
        "帮我订一张{when}去{city}的机票",
        {"when": ("下周五", "明天上午", "月底"), "city": ("成都", "三亚", "西安", "大连")},
    ),
    ("怎么把{device}恢复出厂设置", {"device": ("路由器", "打印机", "平板电脑", "智能手表", "扫地机器人")}),
    ("把{what}换算成{unit}", {"what": ("5英里", "100华氏度", "3磅", "2加仑"), "unit": ("公里", "公制单位")}),
    (
        "提醒我{time}{task}",
        {"time": ("明早八点", "下午三点", "周一"), "task": ("交水电费", "取快递", "续签合同", "预约体检")},
    ),
    (
        "用{lang}写一个{task}的函数",
        {
            "lang": ("Python", "Java", "Go"),
            "task": ("读取CSV文件", "反转链表", "验证邮箱地址", "计算斐波那契数列"),
        },
    ),
    (
        "{tool}报错{error}怎么办",
        {
            "tool": ("npm", "docker", "git", "微信"),
            "error": ("权限不足", "端口被占用", "磁盘空间不足", "证书验证失败"),
        },
    ),
    ("{food}的热量是多少", {"food": ("一碗米饭", "一个苹果", "一杯奶茶", "一块蛋糕")}),
    ("附近有什么好吃的{cuisine}餐厅", {"cuisine": ("川菜", "粤菜", "日料", "火锅", "西餐")}),
    ("{place}几点关门", {"place": ("药店", "邮局", "银行", "超市", "图书馆")}),
    ("给我讲一个关于{topic}的笑话", {"topic": ("程序员", "会计", "医生", "老板")}),
    (
        "{drug}和{other}能一起吃吗",
        {"drug": ("布洛芬", "感冒药", "褪黑素"), "other": ("维生素C", "阿司匹林", "咖啡")},
    ),
    ("怎么取消{what}的自动续费", {"what": ("视频会员", "音乐会员", "云盘", "健身房")}),
    (
        "帮我写一封给{who}的邮件，说明{what}",
        {"who": ("房东", "老板", "客户"), "what": ("水管漏水", "请假两天", "项目延期")},
    ),
    ("{a}兑{b}的汇率是多少", {"a": ("美元", "欧元", "英镑"), "b": ("日元", "人民币", "港币")}),
    ("推荐几本关于{topic}的入门书", {"topic": ("机器学习", "理财", "摄影", "烘焙")}),
    ("设一个{n}分钟的倒计时", {"n": ("5", "10", "25")}),
    (
        "下周{day}和{who}开会讨论{topic}",
        {"day": ("二", "四"), "who": ("王经理", "李工", "陈总"), "topic": ("预算", "合同", "上线计划")},
    ),
    ("{a}到{b}的高铁要多久", {"a": ("杭州", "南京", "武汉"), "b": ("苏州", "长沙", "郑州")}),
    ("怎么给{who}办{what}", {"who": ("孩子", "自己", "父母"), "what": ("护照", "签证", "驾照", "社保卡")}),
)

#: Requests without a topic: greetings, thanks, acknowledgements.
CHITCHAT = (
    "hi there",
    "thank you so much",
    "good morning",
    "ok sounds good",
    "never mind",
    "can you help me",
    "are you there",
    "what can you do",
    "早上好",
    "谢谢你",
    "好的",
    "没事了",
    "在吗",
    "你能做什么",
    "辛苦了",
    "晚安",
)

#: Queries of the session 39 MCP user simulation (/tmp/s39/mcpsim/irrelevant.py): held out,
#: never used to choose a threshold (docs/judge-and-routing.md says the one choice it saw).
HELD_OUT = (
    "asdf qwerty zxcv", "what is the capital of Mongolia", "how do I reset my router password",
    "北京的天气怎么样", "best pizza in Naples", "kubernetes pod crashloop backoff", "明天股市会涨吗",
    "what's my blood type", "quantum chromodynamics lattice", "who won the 1998 world cup final",
    "recipe for sourdough bread", "how tall is the Eiffel tower", "tell me a joke", "我的护照号码是多少",
    "what is the user's favourite colour", "when is my dentist appointment",
    "translate hello into French", "rust borrow checker lifetime error", "地铁几点停运",
    "what did I eat for breakfast", "convert 5 miles to km", "python asyncio event loop",
    "Taylor Swift tour dates", "如何申请签证", "lorem ipsum", "zxcvbnm", "ok", "hmm", "thanks!", "你好",
    "what is the meaning of life", "mortgage interest rates 2024", "how to fix a flat bicycle tire",
    "Doppler effect", "the user's cat name", "where did I park the car", "SELECT * FROM users;",
    "🙂🙂🙂", "1234567890", "???!!!",
)  # fmt: skip

#: Queries per template (drawn without repetition with :data:`SEED`).
PER_TEMPLATE = 5
#: Random letter strings (no word of any language on purpose): never in a memory.
NONSENSE = 10
SEED = 39


def irrelevant_queries() -> list[tuple[str, int]]:
    """The irrelevant queries with their fold (the template's number modulo 5; chit-chat and
    nonsense strings by position): :data:`PER_TEMPLATE` of each template of :data:`EN_TEMPLATES`
    and :data:`ZH_TEMPLATES`, :data:`CHITCHAT`, and :data:`NONSENSE` strings of 2-3 random
    lowercase "words" of 3-6 letters."""
    rng = random.Random(SEED)
    out: list[tuple[str, int]] = []
    for t, (template, slots) in enumerate((*EN_TEMPLATES, *ZH_TEMPLATES)):
        keys = list(slots)
        seen: set[str] = set()
        for _ in range(200):
            if len(seen) == PER_TEMPLATE:
                break
            q = template.format(**{k: rng.choice(slots[k]) for k in keys})
            if q not in seen:
                seen.add(q)
                out.append((q, t % 5))
    out += [(q, i % 5) for i, q in enumerate(CHITCHAT)]
    letters = "abcdefghijklmnopqrstuvwxyz"
    for i in range(NONSENSE):
        words = [
            "".join(rng.choice(letters) for _ in range(rng.randint(3, 6))) for _ in range(rng.randint(2, 3))
        ]
        out.append((" ".join(words), i % 5))
    return out


# ------------------------------------------------------------------ the stores


def _stores() -> list[tuple[str, list[dict[str, Any]], list[tuple[str, set[str], int]]]]:
    """(name, memories, relevant questions as (question, answer ids, fold)) per store."""
    convs = quality.load_locomo(quality.DATA / "locomo" / "locomo_dev.json")
    docs, questions = quality.load_cmrc(quality.DATA / "cmrc" / "cmrc2018_zh_dev.json")
    folds = quality.cmrc_fold_of(questions)
    out = []
    cmrc = [{"id": f"c{i}", "body": t} for i, (_, t) in enumerate(docs)]
    cid = {d: f"c{i}" for i, (d, _) in enumerate(docs)}
    cq = [(q, {cid[x] for x in rel}, f) for (q, rel, _), f in zip(questions, folds, strict=True)]
    turns: list[dict[str, Any]] = []
    lq: list[tuple[str, set[str], int]] = []
    for n, conv in enumerate(convs):
        dates = quality.conv_dates(conv)
        mine = [
            {"id": f"l{n}x{i}", "body": t, "created_at": dates[i]} for i, (_, t) in enumerate(conv["docs"])
        ]
        ids = {d: f"l{n}x{i}" for i, (d, _) in enumerate(conv["docs"])}
        asked = [(q, {ids[x] for x in rel}, n) for q, rel, cat in conv["questions"] if cat != 5]
        out.append((f"locomo {conv['id']}", mine, asked))
        turns += mine
        lq += asked
    out.append(("cmrc", cmrc, cq))
    out.append(("mixed", cmrc + turns, cq + lq))
    out.append(("mcp-sim shaped", _sim_shaped(), []))
    dated = quality.load_locomo(quality.DATA / "locomo" / "locomo_dev.json", date_prefix=True)
    bodies = [t for c in dated for _, t in c["docs"]]
    out.append(("dated locomo", [{"id": f"d{i}", "body": t} for i, t in enumerate(bodies)], []))
    return out


def broad() -> list[tuple[str, str]]:
    """:func:`judge_broad.broad_queries` with the LoCoMo speakers and the CMRC titles."""
    convs = json.loads((quality.DATA / "locomo" / "locomo_dev.json").read_text(encoding="utf-8"))
    names = [c["conversation"][k] for c in convs for k in ("speaker_a", "speaker_b")]
    data = json.loads((quality.DATA / "cmrc" / "cmrc2018_zh_dev.json").read_text(encoding="utf-8"))
    return judge_broad.broad_queries(names, [d["title"] for d in data["docs"]])


def _sim_shaped() -> list[dict[str, Any]]:
    """The memories of the session 39 MCP simulation's store: each CMRC chunk under its
    article's title, each LoCoMo observation a memory."""
    data = json.loads((quality.DATA / "cmrc" / "cmrc2018_zh_dev.json").read_text(encoding="utf-8"))
    out = [{"id": f"z{i}", "body": f"# {d['title']}\n{d['text']}"} for i, d in enumerate(data["docs"])]
    for conv in json.loads((quality.DATA / "locomo" / "locomo_dev.json").read_text(encoding="utf-8")):
        for session in conv["observation"].values():
            for items in session.values():
                out += [{"id": f"o{len(out) + i}", "body": item[0]} for i, item in enumerate(items)]
    return out


# -------------------------------------------------------------- one judge's run


def measure(cv: bool) -> dict[str, Any]:
    """Figures of the judge of the ``md_cg`` this process imports, per store; with ``cv``,
    each evident hit's coverage (``md_cg.search._Thinness``) for :func:`cross_validate`."""
    from md_cg import MdCG, Node, search

    seen: dict[str, list[float]] = {}
    if cv:
        mark = search._Thinness.mark

        def recording(self: Any, doc_id: str, why: dict, held: set, typos: Any, typo_only: bool) -> None:
            cover = self.coverage(why, held, typos)
            share = search._share(cover, self.idf) if cover.held else 0.0
            numbers = cover.held < search.THIN_COVERS_ENOUGH and cover.numbers_only()
            seen[doc_id] = [cover.held, cover.total, share, cover.units.asks_nothing, self.few()]
            seen[doc_id] += [cover.most(), numbers, cover.counted]
            mark(self, doc_id, why, held, typos, typo_only)

        search._Thinness.mark = recording  # type: ignore[method-assign]
    irrelevant = irrelevant_queries()
    wide = broad()
    figures: dict[str, Any] = {}
    for name, memories, relevant in _stores():
        folder = tempfile.mkdtemp(prefix="mdcg-irrelevant-")
        counts: Counter[str] = Counter()
        hits: list[dict[str, Any]] = []
        with MdCG(folder, auto_compact=None) as store:
            store.add_many([Node(verification_basis="data", **m) for m in memories], stamp=False)
            asked = [(q, gold, fold, "relevant") for q, gold, fold in relevant]
            asked += [(q, set(), fold, "irrelevant") for q, fold in irrelevant]
            asked += [(q, set(), -1, "held out") for q in HELD_OUT]
            asked += [(q, set(), -1, "broad") for q, _ in wide]
            for q, gold, fold, kind in asked:
                seen.clear()
                results, _ = store.search(q, k=10, record=False)
                injected = {i.id for i in store.inject(q)}
                accepted = [r.id for r in results if r.state == "ACCEPT"]
                counts[kind] += 1
                if kind == "relevant":
                    first = results[0] if results else None
                    if first is not None and first.id in gold:
                        counts[f"first {first.state}"] += 1
                    counts["accepted answer"] += bool(gold.intersection(accepted))
                    counts["injected answer"] += bool(gold & injected)
                else:
                    counts[f"{kind} accept"] += bool(accepted)
                    counts[f"{kind} inject"] += bool(injected)
                if cv and kind in ("relevant", "irrelevant"):
                    hits.append(_hits(results, gold, fold, kind, seen))
        figures[name] = {"counts": dict(counts), "hits": hits}
    return figures


def _hits(results: list, gold: set[str], fold: int, kind: str, seen: dict) -> dict[str, Any]:
    """One query's results for :func:`cross_validate`: per hit whether it is an answer,
    whether a rule other than thin evidence keeps it from ACCEPT, and its coverage."""
    rows = []
    for r in results:
        other = r.filler or any(k in r.evidence for k in ("common_only", "tag_typo"))
        accept = r.state == "ACCEPT" or (r.state == "DEFER" and "thin" in r.evidence and not other)
        rows.append([r.id in gold, accept and not other, seen.get(r.id)])
    return {"fold": fold, "kind": kind, "hits": rows}


# ------------------------------------------------------------ cross-validation

#: The thresholds tried: (THIN_SHARE, THIN_SHARE_ONE).
GRID = [(a, b) for a in (0.3, 0.35, 0.4, 0.45, 0.5, 0.6) for b in (0.4, 0.5, 0.6, 0.7, 0.8, 1.01)]
FOLDS = 5


def _thin(cover: list | None, share: float, one: float) -> bool:
    """``md_cg.search._thin`` of a recorded coverage with the thresholds ``share``, ``one``."""
    if cover is None:
        return False
    held, total, weight, asks_nothing, few, most, numbers, counted = cover
    if not total:
        return bool(asks_nothing)
    if not held:
        return True
    if not numbers and (total < 2 or most or held >= 4):  # md_cg.search.THIN_COVERS_ENOUGH
        return False
    if few:
        return held == 1 and weight < max(0.2, 0.8 / total)
    return numbers or weight < (one if min(held, counted) == 1 else share)


def _score(figures: dict[str, Any], pair: tuple[float, float], folds: set[int]) -> tuple[float, float]:
    """(irrelevant queries with an ACCEPT hit, relevant ones whose first answer is ACCEPT
    without the thin rule but not with ``pair``): shares, averaged over LoCoMo, CMRC, mixed."""
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    for name, got in figures.items():
        group = name.split()[0]
        if group not in ("locomo", "cmrc", "mixed"):
            continue
        for q in got["hits"]:
            if q["fold"] not in folds:
                continue
            c = groups[group]
            c[q["kind"]] += 1
            ok = [accept and not _thin(cover, *pair) for _, accept, cover in q["hits"]]
            if q["kind"] == "irrelevant":
                c["accept"] += any(ok)
            elif q["hits"] and q["hits"][0][0] and q["hits"][0][1]:
                c["lost"] += not ok[0]
    irr = sum(c["accept"] / max(1, c["irrelevant"]) for c in groups.values()) / max(1, len(groups))
    lost = sum(c["lost"] / max(1, c["relevant"]) for c in groups.values()) / max(1, len(groups))
    return irr, lost


def _cost(
    figures: dict[str, Any], pair: tuple[float, float], folds: set[int], lam: float
) -> tuple[float, str]:
    """What :func:`cross_validate` minimises (ties: the pair's text, the lowest first)."""
    irr, lost = _score(figures, pair, folds)
    return irr + lam * lost, str(pair)


def cross_validate(figures: dict[str, Any]) -> str:
    """The thresholds each fold's training folds choose, and their held-out figures."""
    lines = ["| lambda | fold | chosen (THIN_SHARE, THIN_SHARE_ONE) | held out: irrelevant with ACCEPT | "
             "held out: first answers deferred |", "|---|---|---|---|---|"]  # fmt: skip
    every = set(range(FOLDS))
    for lam in (1.0, 2.0, 3.0):
        for fold in range(FOLDS):
            train = every - {fold}

            best = min(GRID, key=lambda p, train=train, lam=lam: _cost(figures, p, train, lam))
            irr, lost = _score(figures, best, {fold})
            lines.append(f"| {lam:g} | {fold} | {best} | {100 * irr:.1f} | {100 * lost:.1f} |")
        best = min(GRID, key=lambda p, lam=lam: _cost(figures, p, every, lam))
        irr, lost = _score(figures, best, every)
        lines.append(f"| {lam:g} | all | {best} | {100 * irr:.1f} | {100 * lost:.1f} |")
    return "\n".join(lines)


# -------------------------------------------------------------------- the table


def _pct(counts: dict[str, int], key: str, of: str) -> str:
    return f"{100 * counts.get(key, 0) / counts[of]:.1f}" if counts.get(of) else "-"


def table(runs: dict[str, dict[str, Any]]) -> str:
    """One row per store and judge."""
    lines = [
        "| store | judge | answer first, ACCEPT | answer first, DEFER | an answer ACCEPT in the top 10 | "
        "inject holds an answer | irrelevant: an ACCEPT hit | irrelevant: inject items | "
        "held out: an ACCEPT hit | held out: inject items | broad: an ACCEPT hit | broad: inject items |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for judge, figures in runs.items():
        for name, got in figures.items():
            groups[(name.split()[0] if name.startswith("locomo") else name, judge)].update(got["counts"])
    for (name, judge), c in groups.items():
        cells = [
            _pct(c, "first ACCEPT", "relevant"),
            _pct(c, "first DEFER", "relevant"),
            _pct(c, "accepted answer", "relevant"),
            _pct(c, "injected answer", "relevant"),
            _pct(c, "irrelevant accept", "irrelevant"),
            _pct(c, "irrelevant inject", "irrelevant"),
            _pct(c, "held out accept", "held out"),
            _pct(c, "held out inject", "held out"),
            _pct(c, "broad accept", "broad"),
            _pct(c, "broad inject", "broad"),
        ]
        label = f"{name} ({c['relevant']} questions)" if c["relevant"] else name
        lines.append(f"| {label} | {judge} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _old_checkout(rev: str, into: Path) -> Path | None:
    """``md_cg`` of ``rev`` extracted under ``into``; None (with a message) when git cannot."""
    archive = into / "old.tar"
    done = subprocess.run(
        ["git", "-C", str(REPO), "archive", "-o", str(archive), rev, "md_cg"], capture_output=True, text=True
    )
    if done.returncode != 0:
        print(f"no old judge: git archive {rev}: {done.stderr.strip()}", file=sys.stderr)
        return None
    with tarfile.open(archive) as tar:
        tar.extractall(into / "old", filter="data")
    return into / "old"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--old", default=OLD, help="the git revision of the old judge (default: %(default)s)")
    ap.add_argument("--cv", action="store_true", help="choose the thin thresholds by cross-validation")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # a path: measure the md_cg there
    args = ap.parse_args(argv)
    if args.child is not None:
        sys.path.insert(0, args.child)  # that md_cg, not the one bench/quality.py imported
        for module in [m for m in sys.modules if m == "md_cg" or m.startswith("md_cg.")]:
            del sys.modules[module]
        print(json.dumps(measure(args.cv)))
        return 0
    with tempfile.TemporaryDirectory(prefix="mdcg-judge-old-") as tmp:
        old = _old_checkout(args.old, Path(tmp))
        jobs = {"new": str(REPO)}
        if old is not None:
            jobs[f"old ({args.old})"] = str(old)
        env = dict(os.environ, PYTHONHASHSEED="0")
        procs = {
            judge: subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    path,
                    *(["--cv"] if args.cv and judge == "new" else []),
                ],
                stdout=subprocess.PIPE,
                env=env,
            )
            for judge, path in jobs.items()
        }
        runs = {}
        for judge, proc in procs.items():
            out = proc.communicate()[0]
            if proc.returncode != 0:
                print(f"the {judge} judge's run failed (exit {proc.returncode})", file=sys.stderr)
                return 1
            runs[judge] = json.loads(out)
    print(table({j: runs[j] for j in sorted(runs, reverse=True)}))
    print(f"\n{len(irrelevant_queries())} irrelevant queries, {len(HELD_OUT)} held out, {len(broad())} broad")
    if args.cv:
        print()
        print(cross_validate(runs["new"]))
    if args.json:
        args.json.write_text(json.dumps(runs, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
