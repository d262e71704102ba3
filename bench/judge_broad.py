"""A broader held-out set of requests no memory answers, for bench/judge_irrelevant.py.

Session 40's MCP user simulation found 20 of 55 unrelated requests with an ACCEPT hit where
the bench's templates (:data:`judge_irrelevant.EN_TEMPLATES`) showed 2-10%: its requests
shared more with the stored memories -- numbers (arithmetic beside dated turns), a word of a
longer Chinese compound (计算机 of a longer term), a name (a LoCoMo speaker asked about
something no turn says), a request word (可以). :func:`broad_queries` writes such requests
generically, by kind, with a fixed seed: arithmetic (English and Chinese), questions naming
a conversation's speakers with things no chat says (the names read from the data), Chinese
terms that hold a common shorter word, stored article titles with their first character
changed (another member of the family), and everyday requests of both languages. The set is
held out: it chooses no rule and no threshold (bench/judge_irrelevant.py --cv chooses on the
templates and the relevant questions).
"""

from __future__ import annotations

import random

#: Arithmetic and unit requests: numbers of 1-31 (a day of a month) and larger.
EN_ARITHMETIC = (
    "what is {a} times {b}?",
    "what's {a} plus {b}",
    "calculate {c} divided by {a}",
    "what is {a} percent of {c}",
    "{c} minus {b} equals what",
)
ZH_ARITHMETIC = (
    "{a}乘以{b}等于多少",
    "{c}除以{a}是多少",
    "帮我算一下{a}加{b}",
    "{c}的{a}%是多少",
    "{c}减去{b}得几",
)

#: Things of a person no conversation of the bench says (a speaker's name is filled in).
EN_PERSONAL = (
    "what is {name}'s passport number",
    "what is {name}'s blood type",
    "send {name} the quarterly invoice",
    "when is {name}'s dentist appointment",
    "what shoe size does {name} wear",
    "what is {name}'s wifi password",
    "book {name} a rental car at the airport",
    "did {name} renew the car insurance",
)
#: Chinese terms holding a shorter common word (电池 of 固态电池, 汽车 of 氢能源汽车).
ZH_COMPOUNDS = (
    "固态电池",
    "氢能源汽车",
    "光刻机",
    "超导量子比特",
    "碳纳米管",
    "脑机接口",
    "智能合约",
    "元宇宙平台",
    "激光雷达",
    "边缘计算节点",
    "生成式对抗网络",
    "钙钛矿太阳能电池",
    "可控核聚变",
    "mRNA疫苗",
    "无人驾驶出租车",
    "数字人民币钱包",
)
ZH_TERM_FRAMES = ("什么是{t}？", "{t}的原理是什么", "{t}现在多少钱", "{t}有哪些应用")
#: Frames of a stored title with its first character changed.
ZH_TITLE_FRAMES = ("{t}又名什么", "{t}分布在哪里", "{t}是哪一年成立的", "{t}的特点是什么")
TITLE_CHARS = "黑白紫青金银北南东西"
EN_EVERYDAY = (
    "what's the best way to descale a kettle",
    "how many tablespoons are in a cup",
    "can you proofread my resume",
    "which vpn is fastest for streaming",
    "what's the speed limit on a german autobahn",
    "how do I unclog a bathroom sink",
    "suggest a name for a golden retriever puppy",
    "what's the plot of hamlet",
    "how do I export contacts from my phone",
    "give me a 20 minute bodyweight workout",
    "is it going to snow in Chicago on Sunday",
    "how do I get a refund for a cancelled flight",
    "what does APR mean on a credit card",
    "write a limerick about a lazy cat",
    "how long does it take to charge a tesla",
    "where is the nearest charging station",
    "what's the difference between a latte and a flat white",
    "how do I pair bluetooth headphones with my laptop",
    "when does daylight saving time end",
    "how much should I tip a hairdresser",
    "what's a good stretch for lower back pain",
    "how do I make cold brew coffee",
    "translate thank you very much into japanese",
    "who painted the girl with a pearl earring",
    "what's the password policy for a strong password",
)
ZH_EVERYDAY = (
    "附近哪里可以{x}",
    "我想{x}，有什么建议",
    "在哪里可以{x}",
)
ZH_EVERYDAY_SLOTS = ("停车", "打印文件", "换外币", "修手机", "洗车", "租自行车", "寄国际快递", "买电话卡")
ZH_EVERYDAY_MORE = (
    "今天限行尾号是多少",
    "怎么清理手机内存",
    "下个月的信用卡账单是多少",
    "帮我把这段文字改得正式一点",
    "孩子发烧三十八度要去医院吗",
    "怎么用微信转账给别人",
    "周末有什么适合带孩子去的地方",
    "帮我查一下快递单号",
    "空调遥控器没反应怎么办",
    "电脑开机很慢怎么办",
)
SEED = 41


def broad_queries(names: list[str], titles: list[str], per: int = 4) -> list[tuple[str, str]]:
    """The held-out unrelated requests as (request, kind): ``per`` of each arithmetic frame,
    each personal frame with a random speaker of ``names``, each term frame with ``per`` + 2
    random terms of :data:`ZH_COMPOUNDS`, 20 titles of ``titles`` (of at least 3 CJK
    characters) with the first character changed, and the everyday requests."""
    rng = random.Random(SEED)
    out: list[tuple[str, str]] = []
    for frame in EN_ARITHMETIC + ZH_ARITHMETIC:
        for _ in range(per):
            a, b, c = rng.randint(2, 31), rng.randint(2, 31), rng.randint(100, 999)
            kind = "arithmetic " + ("en" if frame.isascii() else "zh")
            out.append((frame.format(a=a, b=b, c=c), kind))
    for frame in EN_PERSONAL:
        for name in rng.sample(sorted(set(names)), min(3, len(set(names)))):
            out.append((frame.format(name=name), "name en"))
    for frame in ZH_TERM_FRAMES:
        for term in rng.sample(ZH_COMPOUNDS, per + 2):
            out.append((frame.format(t=term), "compound zh"))
    long = sorted({t for t in titles if len(t) >= 3 and all("\u4e00" <= c <= "\u9fff" for c in t)})
    for i, title in enumerate(rng.sample(long, min(20, len(long)))):
        changed = rng.choice([c for c in TITLE_CHARS if c != title[0]]) + title[1:]
        if changed not in long:
            out.append((ZH_TITLE_FRAMES[i % len(ZH_TITLE_FRAMES)].format(t=changed), "title zh"))
    out += [(q, "everyday en") for q in EN_EVERYDAY]
    out += [(f.format(x=x), "everyday zh") for f in ZH_EVERYDAY for x in rng.sample(ZH_EVERYDAY_SLOTS, per)]
    out += [(q, "everyday zh") for q in ZH_EVERYDAY_MORE]
    return out
