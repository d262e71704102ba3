"""A deterministic, seed-shaped sample cognitive-graph database (sqlite).

:func:`generate` writes a database in the reference schema
(:mod:`md_cg.sqlite_source`, ``docs/sqlite-schema.md``) shaped like the
seed's real store of 3,048 knowledge nodes (DESIGN §3, §12):

* knowledge nodes spread over 90 domains with a skewed (Zipf-like) size
  distribution -- the largest domain holds about 5% of the nodes, none holds
  one -- plus a few orphans without an observation position;
* ``observation_position`` carries an instance tail (``计算机科学·知识点（二分查找）``,
  ``Physics · topic (Doppler effect)``, ASCII and full-width brackets, skeleton
  suffixes such as ``内容（按骨架填充）``), so about 3,000 distinct raw values
  normalise to the 90 domains;
* ``observation_tool`` is one value on 93% of knowledge nodes,
  ``existence_constraint`` one value on 95%, ``time_window`` takes 3 values;
* a few percent carry an explicit ``domain:`` tag;
* Chinese and English bodies built from each domain's vocabulary of real
  concept names (hand-written notes for the concepts a demo searches for),
  with CCG marks -- complete and incomplete, Chinese and English, some given as
  ``state_attributes.ccg`` -- ``verification_basis`` on most nodes,
  ``non_applicable_conditions`` on many, a few bodies with ``---`` lines and
  leading or trailing whitespace;
* anchor, structural, contextual, self, rejected and unresolved nodes;
* edges of all six types, a few of them dangling (their target is absent).

The same arguments give the same file, byte for byte, with the same sqlite
library. The slice (``slice_=True``: 200 knowledge nodes in 15 domains and a
few nodes of every other layer) is shipped as ``md_cg/data/sample.sqlite``;
:func:`bundled_sample_path` finds it.

Command line: ``python -m md_cg.sample OUT.sqlite [--slice] [--knowledge N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sqlite3
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .ccg import ELEMENTS
from .errors import MdcgError
from .layout import domain_from_tags, route_key
from .node import EDGE_TYPES, Edge, Node
from .sqlite_source import write_nodes

#: Domains in size-rank order (largest first): (name, language, concepts). The
#: concepts are the instance names that appear in observation positions and
#: bodies. Names never contain brackets (they would end the instance tail).
DOMAINS: tuple[tuple[str, str, str], ...] = (
    (
        "计算机科学",
        "zh",
        "二分查找|快速排序|归并排序|哈希表|动态规划|图的广度优先搜索|迪杰斯特拉算法|递归|时间复杂度|堆排序|红黑树|并查集|贪心算法|拓扑排序",
    ),
    (
        "物理学",
        "zh",
        "牛顿第二定律|牛顿第一定律|牛顿第三定律|能量守恒定律|动量守恒定律|万有引力定律|欧姆定律|多普勒效应|胡克定律|简谐运动|阿基米德原理|伯努利方程|自由落体",
    ),
    (
        "高等数学",
        "zh",
        "极限|导数|微分中值定理|洛必达法则|泰勒公式|定积分|不定积分|牛顿-莱布尼茨公式|多元函数偏导数|二重积分|级数收敛|傅里叶级数|常微分方程",
    ),
    (
        "化学",
        "zh",
        "化学平衡|勒夏特列原理|氧化还原反应|酸碱中和|摩尔质量|元素周期律|化学键|电解|原电池|反应速率|催化剂|溶解度",
    ),
    (
        "生物学",
        "zh",
        "光合作用|细胞呼吸|DNA复制|有丝分裂|减数分裂|孟德尔遗传定律|自然选择|蛋白质合成|酶的特性|生态系统能量流动|内环境稳态|基因突变",
    ),
    (
        "Computer Science",
        "en",
        "binary search|quicksort|merge sort|hash table|dynamic programming|breadth-first search|"
        "Dijkstra's algorithm|recursion|Big-O notation|binary heap|TCP three-way handshake|"
        "garbage collection",
    ),
    (
        "中国历史",
        "zh",
        "秦统一六国|郡县制|汉武帝推恩令|丝绸之路|科举制度|安史之乱|王安石变法|郑和下西洋|鸦片战争|洋务运动|辛亥革命|五四运动",
    ),
    (
        "经济学",
        "zh",
        "供求定律|边际效用递减|机会成本|价格弹性|通货膨胀|比较优势|市场失灵|公共物品|外部性|凯恩斯乘数",
    ),
    (
        "心理学",
        "zh",
        "经典条件反射|操作性条件反射|工作记忆|认知失调|马斯洛需求层次|从众效应|艾宾浩斯遗忘曲线|习得性无助|皮亚杰认知发展阶段|确认偏误",
    ),
    (
        "临床医学",
        "zh",
        "高血压分级|糖尿病诊断标准|心肌梗死|抗生素合理使用|心肺复苏|贫血|肺炎|休克|水电解质平衡|发热待查",
    ),
    (
        "Physics",
        "en",
        "Newton's second law|conservation of energy|Doppler effect|Ohm's law|Maxwell's equations|"
        "special relativity|photoelectric effect|entropy|simple harmonic motion|Snell's law",
    ),
    (
        "Biology",
        "en",
        "photosynthesis|cellular respiration|DNA replication|natural selection|mitosis|meiosis|"
        "enzyme kinetics|the Krebs cycle|homeostasis|transcription and translation",
    ),
    (
        "线性代数",
        "zh",
        "矩阵乘法|行列式|特征值与特征向量|矩阵的秩|线性无关|正交矩阵|二次型|相似对角化|向量空间|高斯消元法",
    ),
    (
        "概率论与数理统计",
        "zh",
        "贝叶斯定理|中心极限定理|大数定律|正态分布|二项分布|泊松分布|条件概率|期望与方差|假设检验|置信区间|最大似然估计",
    ),
    ("数据结构", "zh", "链表|栈|队列|二叉搜索树|平衡二叉树|B树|跳表|字典树|邻接表|循环队列"),
    (
        "操作系统",
        "zh",
        "进程与线程|死锁|页面置换算法|虚拟内存|进程调度|信号量|文件系统|中断|上下文切换|写时复制",
    ),
    (
        "计算机网络",
        "zh",
        "TCP三次握手|拥塞控制|滑动窗口|DNS解析|HTTP缓存|子网划分|ARP协议|路由选择|NAT|TLS握手",
    ),
    (
        "机器学习",
        "zh",
        "梯度下降|过拟合|交叉验证|正则化|决策树|支持向量机|反向传播|随机森林|主成分分析|K均值聚类",
    ),
    (
        "有机化学",
        "zh",
        "取代反应|加成反应|消去反应|手性碳|芳香性|酯化反应|官能团|同分异构体|格氏试剂|醛的氧化",
    ),
    (
        "遗传学",
        "zh",
        "分离定律|自由组合定律|伴性遗传|连锁与交换|染色体变异|哈迪-温伯格平衡|基因型与表现型|多基因遗传|表观遗传",
    ),
    (
        "地理学",
        "zh",
        "板块构造|季风气候|大气环流|洋流|地球公转|等高线|人口迁移|城市化|喀斯特地貌|水循环",
    ),
    (
        "世界史",
        "zh",
        "工业革命|文艺复兴|宗教改革|法国大革命|美国独立战争|第一次世界大战|第二次世界大战|冷战|地理大发现|启蒙运动",
    ),
    (
        "Mathematics",
        "en",
        "Pythagorean theorem|Euler's formula|prime factorization|mathematical induction|the "
        "fundamental theorem of calculus|Bayes' theorem|the pigeonhole principle|modular arithmet"
        "ic|eigenvalues|the binomial theorem",
    ),
    (
        "Economics",
        "en",
        "supply and demand|opportunity cost|comparative advantage|price elasticity|inflation|"
        "the multiplier effect|game theory|marginal utility|externalities|monetary policy",
    ),
    (
        "语言学",
        "zh",
        "音位|语素|语法化|句法树|语用预设|言语行为理论|萨丕尔-沃尔夫假说|语言习得关键期|方言与标准语|声调",
    ),
    (
        "中国古典文学",
        "zh",
        "唐诗格律|宋词词牌|楚辞|诗经赋比兴|红楼梦|史记|桃花源记|古文运动|元曲|骈文",
    ),
    (
        "天文学",
        "zh",
        "开普勒定律|赫罗图|恒星演化|黑洞|哈勃定律|宇宙微波背景辐射|日食与月食|潮汐|太阳系形成|红移",
    ),
    (
        "生态学",
        "zh",
        "食物链|生态位|种群增长曲线|群落演替|生物多样性|碳循环|氮循环|竞争排斥原理|生态金字塔|关键种",
    ),
    (
        "电磁学",
        "zh",
        "库仑定律|高斯定理|电磁感应|楞次定律|安培环路定理|洛伦兹力|电容|自感与互感|电磁波",
    ),
    (
        "热力学",
        "zh",
        "热力学第一定律|热力学第二定律|卡诺循环|熵增原理|理想气体状态方程|比热容|绝热过程|热传导|相变潜热",
    ),
    ("数据库系统", "zh", "关系模型|SQL连接|范式|事务ACID|索引B+树|并发控制|预写日志|查询优化|MVCC"),
    (
        "软件工程",
        "zh",
        "单元测试|持续集成|代码评审|设计模式|需求分析|敏捷开发|重构|版本控制|技术债务",
    ),
    (
        "Chemistry",
        "en",
        "chemical equilibrium|Le Chatelier's principle|redox reactions|the periodic table|"
        "covalent bonding|acid-base titration|reaction rates|catalysis|electrolysis",
    ),
    (
        "Psychology",
        "en",
        "classical conditioning|working memory|cognitive dissonance|confirmation bias|Maslow's "
        "hierarchy of needs|the forgetting curve|learned helplessness|the bystander effect|"
        "growth mindset",
    ),
    (
        "量子力学",
        "zh",
        "波粒二象性|不确定性原理|薛定谔方程|量子隧穿|泡利不相容原理|量子纠缠|能级跃迁|自旋|波函数坍缩",
    ),
    ("光学", "zh", "光的折射|全反射|光的干涉|光的衍射|偏振|透镜成像|色散|激光原理"),
    (
        "细胞生物学",
        "zh",
        "细胞膜流动镶嵌模型|线粒体|内质网|高尔基体|细胞凋亡|细胞周期|主动运输|细胞骨架",
    ),
    (
        "神经科学",
        "zh",
        "动作电位|突触传递|神经递质|海马体与记忆|大脑可塑性|反射弧|多巴胺奖赏回路|血脑屏障",
    ),
    (
        "药理学",
        "zh",
        "药代动力学|半衰期|首过效应|受体激动剂|治疗指数|药物相互作用|生物利用度|耐药性",
    ),
    ("免疫学", "zh", "抗原与抗体|体液免疫|细胞免疫|疫苗原理|过敏反应|自身免疫病|免疫记忆|补体系统"),
    (
        "微观经济学",
        "zh",
        "消费者剩余|无差异曲线|边际成本|完全竞争市场|垄断定价|纳什均衡|规模经济|信息不对称",
    ),
    (
        "宏观经济学",
        "zh",
        "国内生产总值|菲利普斯曲线|货币乘数|财政政策|IS-LM模型|经济周期|汇率决定|失业率",
    ),
    ("金融学", "zh", "复利|净现值|资本资产定价模型|有效市场假说|期权定价|分散投资|久期|杠杆"),
    ("会计学", "zh", "复式记账|资产负债表|利润表|现金流量表|权责发生制|折旧|存货计价|会计恒等式"),
    (
        "管理学",
        "zh",
        "SWOT分析|目标管理|激励理论|组织结构|决策树分析|波特五力模型|PDCA循环|领导力理论",
    ),
    (
        "哲学",
        "zh",
        "苏格拉底问答法|柏拉图理念论|笛卡尔我思故我在|康德绝对命令|辩证法|经验主义|存在主义|功利主义",
    ),
    ("逻辑学", "zh", "三段论|充分条件与必要条件|归纳推理|演绎推理|逻辑谬误|命题逻辑|反证法|量词"),
    (
        "法学",
        "zh",
        "罪刑法定原则|无罪推定|诚实信用原则|合同成立要件|正当防卫|诉讼时效|物权法定|比例原则",
    ),
    (
        "社会学",
        "zh",
        "社会分层|社会化|韦伯科层制|涂尔干失范理论|社会资本|符号互动论|社会流动|文化资本",
    ),
    (
        "教育学",
        "zh",
        "最近发展区|布鲁姆目标分类|建构主义学习|形成性评价|因材施教|间隔重复|费曼学习法|元认知",
    ),
    (
        "Medicine",
        "en",
        "hypertension|type 2 diabetes|myocardial infarction|antibiotic resistance|cardiopulmonary"
        " resuscitation|sepsis|asthma|vaccination",
    ),
    (
        "History",
        "en",
        "the Industrial Revolution|the Renaissance|the French Revolution|the Cold War|the "
        "printing press|the Silk Road|the fall of Rome|the Meiji Restoration",
    ),
    (
        "Astronomy",
        "en",
        "Kepler's laws|the Hertzsprung-Russell diagram|black holes|Hubble's law|the cosmic "
        "microwave background|stellar nucleosynthesis|exoplanets|tides",
    ),
    (
        "Geology",
        "en",
        "plate tectonics|the rock cycle|radiometric dating|earthquakes|volcanism|sedimentary "
        "rocks|glaciation|the Mohs scale",
    ),
    (
        "Linguistics",
        "en",
        "phonemes|morphemes|syntax trees|the Sapir-Whorf hypothesis|pragmatics|language acquisiti"
        "on|grammaticalization|code-switching",
    ),
    (
        "Statistics",
        "en",
        "the central limit theorem|p-values|confidence intervals|linear regression|standard "
        "deviation|Simpson's paradox|bootstrapping|correlation vs causation",
    ),
    ("编译原理", "zh", "词法分析|语法分析|LR分析|抽象语法树|中间代码|寄存器分配|常量折叠|类型检查"),
    (
        "密码学",
        "zh",
        "对称加密|RSA算法|哈希函数|数字签名|迪菲-赫尔曼密钥交换|椭圆曲线密码|消息认证码|零知识证明",
    ),
    (
        "离散数学",
        "zh",
        "鸽巢原理|容斥原理|图论基础|欧拉回路|哈密顿回路|关系与等价类|布尔代数|递推关系",
    ),
    (
        "数论",
        "zh",
        "素数定理|欧几里得算法|费马小定理|中国剩余定理|同余|欧拉函数|哥德巴赫猜想|二次剩余",
    ),
    (
        "几何学",
        "zh",
        "勾股定理|相似三角形|圆周角定理|正弦定理|余弦定理|射影几何|非欧几何|向量法证明",
    ),
    ("分析化学", "zh", "滴定分析|色谱法|光谱分析|质谱|误差与有效数字|标准曲线|重量分析|缓冲溶液"),
    ("生物化学", "zh", "糖酵解|三羧酸循环|氧化磷酸化|蛋白质折叠|酶动力学|脂肪酸β氧化|核酸结构|ATP"),
    (
        "微生物学",
        "zh",
        "革兰氏染色|细菌生长曲线|病毒复制|抗生素作用机制|无菌操作|发酵|芽孢|菌落计数",
    ),
    ("植物学", "zh", "植物激素|蒸腾作用|光周期|双受精|根的吸收|气孔调节|顶端优势|种子萌发"),
    ("动物学", "zh", "脊椎动物分类|迁徙行为|变态发育|恒温与变温|社会性昆虫|拟态|冬眠|生殖隔离"),
    ("气象学", "zh", "锋面|气旋与反气旋|温室效应|厄尔尼诺|相对湿度|台风形成|逆温层|降水类型"),
    ("海洋学", "zh", "温盐环流|潮汐成因|海洋酸化|上升流|海浪|珊瑚礁生态|深海热泉|海平面上升"),
    ("音乐理论", "zh", "五度圈|大调与小调|和弦功能|节拍与节奏|对位法|调式|音程|奏鸣曲式"),
    (
        "美术史",
        "zh",
        "文艺复兴绘画|印象派|立体主义|宋代山水画|透视法|巴洛克艺术|抽象表现主义|文人画",
    ),
    ("建筑学", "zh", "斗拱|哥特式建筑|包豪斯|承重墙与框架结构|采光设计|园林造景|黄金分割|模数制"),
    ("机械工程", "zh", "齿轮传动|材料疲劳|应力集中|轴承选型|公差与配合|四杆机构|热处理|有限元分析"),
    ("电子工程", "zh", "运算放大器|基尔霍夫定律|滤波器|模数转换|PN结|数字逻辑门|锁相环|阻抗匹配"),
    ("材料科学", "zh", "晶体结构|位错|相图|热膨胀|复合材料|半导体掺杂|腐蚀|超导"),
    ("自动控制", "zh", "PID控制|传递函数|稳定性判据|根轨迹|频率响应|状态空间|负反馈|卡尔曼滤波"),
    (
        "Philosophy",
        "en",
        "the Socratic method|Plato's theory of forms|Cartesian doubt|Kant's categorical imperativ"
        "e|utilitarianism|existentialism|empiricism|the trolley problem",
    ),
    (
        "Music Theory",
        "en",
        "the circle of fifths|major and minor scales|chord functions|counterpoint|time signatures"
        "|intervals|sonata form|modes",
    ),
    (
        "Electrical Engineering",
        "en",
        "Kirchhoff's laws|operational amplifiers|RC circuits|transformers|analog-to-digital "
        "conversion|impedance matching|PN junctions|three-phase power",
    ),
    (
        "Software Engineering",
        "en",
        "unit testing|continuous integration|code review|refactoring|design patterns|version "
        "control|technical debt|semantic versioning",
    ),
    (
        "Ecology",
        "en",
        "food webs|ecological niches|logistic growth|ecological succession|keystone species|"
        "the carbon cycle|biodiversity|the nitrogen cycle",
    ),
    (
        "Genetics",
        "en",
        "Mendelian inheritance|Hardy-Weinberg equilibrium|genetic linkage|epigenetics|point "
        "mutations|sex-linked traits|polygenic traits|CRISPR gene editing",
    ),
    (
        "Art History",
        "en",
        "Impressionism|linear perspective|the Baroque|Cubism|Renaissance portraiture|Abstract "
        "Expressionism|Ukiyo-e|the Bauhaus",
    ),
    (
        "Geography",
        "en",
        "monsoons|ocean currents|urbanization|the water cycle|karst landscapes|population "
        "pyramids|latitude and climate|river deltas",
    ),
    (
        "Neuroscience",
        "en",
        "action potentials|synaptic transmission|neuroplasticity|the hippocampus|dopamine "
        "reward pathways|the blood-brain barrier|reflex arcs|long-term potentiation",
    ),
    (
        "Sociology",
        "en",
        "social stratification|socialization|bureaucracy|anomie|social capital|symbolic interacti"
        "onism|social mobility|cultural capital",
    ),
    (
        "Linear Algebra",
        "en",
        "matrix multiplication|determinants|eigenvectors|vector spaces|Gaussian elimination|"
        "orthogonality|rank and nullity|singular value decomposition",
    ),
    (
        "Operating Systems",
        "en",
        "processes and threads|deadlock|virtual memory|page replacement|scheduling|semaphores|"
        "context switching|copy-on-write",
    ),
    (
        "Organic Chemistry",
        "en",
        "nucleophilic substitution|addition reactions|chirality|aromaticity|esterification|"
        "functional groups|isomerism|Grignard reagents",
    ),
    (
        "营养学",
        "zh",
        "基础代谢率|膳食纤维|必需氨基酸|维生素D|血糖生成指数|蛋白质需要量|膳食平衡宝塔|微量元素",
    ),
    (
        "流行病学",
        "zh",
        "基本再生数|队列研究|病例对照研究|相对危险度|混杂偏倚|筛检试验|发病率与患病率|随机对照试验",
    ),
)

#: Hand-written notes for the concepts a demo is likely to search for:
#: concept -> (gloss, applies when, steps, executes, verified by,
#: not-applicable conditions separated by "|", verification basis).
CURATED: dict[str, tuple[str, str, str, str, str, str, str]] = {
    "二分查找": (
        "二分查找在有序数组上每次取中间元素与目标比较，把搜索区间缩小一半，"
        "最坏比较次数约为 log2(n)+1，时间复杂度 O(log n)。常见写法用左闭右开区间 [lo, hi)，"
        "循环条件 lo < hi，取中点 mid = lo + (hi - lo) // 2 以避免整数溢出。",
        "有序数组，支持 O(1) 随机访问",
        "取中点 → 比较 → 缩小区间 → 区间为空时结束",
        "返回目标下标，找不到时返回 -1 或插入位置",
        "单元测试覆盖空数组、单元素、重复元素和首尾边界",
        "数组未排序|链表等不支持随机访问的结构",
        "test",
    ),
    "快速排序": (
        "快速排序选一个基准元素，把数组划分成小于基准和大于基准的两部分，再递归排序两部分。"
        "平均时间复杂度 O(n log n)，最坏 O(n²)（每次都选到最值作基准），原地排序但不稳定。",
        "内存中的可随机访问序列，对稳定性无要求",
        "选基准 → 划分 → 递归左半 → 递归右半",
        "原地得到升序序列",
        "与标准库排序结果对拍的随机测试",
        "要求稳定排序|输入近乎有序且基准固定取首元素",
        "test",
    ),
    "哈希表": (
        "哈希表用哈希函数把键映射到桶，平均 O(1) 完成插入、查找和删除。"
        "冲突用链地址法或开放寻址解决；装载因子超过阈值（常取 0.75）时扩容并重新哈希。",
        "键可哈希且相等判断与哈希值一致",
        "计算哈希 → 定位桶 → 处理冲突 → 必要时扩容",
        "按键返回值或报告不存在",
        "插入、删除、扩容前后一致性的单元测试",
        "需要按键有序遍历|键在插入后被修改",
        "test",
    ),
    "动态规划": (
        "动态规划把问题拆成重叠子问题，按状态转移方程自底向上（或记忆化自顶向下）求解，"
        "每个子问题只算一次。适用前提是最优子结构和无后效性，典型例子有背包问题和最长公共子序列。",
        "问题具有最优子结构且子问题重叠",
        "定义状态 → 写转移方程 → 确定边界 → 按依赖顺序填表",
        "输出最优值，必要时回溯出方案",
        "与暴力枚举在小规模输入上对拍",
        "子问题之间不重叠|状态空间过大无法存表",
        "test",
    ),
    "迪杰斯特拉算法": (
        "迪杰斯特拉算法求单源最短路：每次从未确定的顶点中取距离最小者，用它松弛相邻边。"
        "用二叉堆实现时复杂度 O((V+E) log V)。",
        "有向或无向图，边权非负",
        "初始化距离 → 取堆顶 → 松弛邻边 → 重复直到堆空",
        "返回源点到各顶点的最短距离与前驱",
        "与 Bellman-Ford 在随机图上对拍",
        "存在负权边|需要所有点对最短路时效率不如 Floyd",
        "test",
    ),
    "牛顿第二定律": (
        "牛顿第二定律：物体的加速度与所受合外力成正比，与质量成反比，方向与合外力相同，"
        "即 F = ma。国际单位制中 1 N = 1 kg·m/s²。解题时先选研究对象、做受力分析，再沿坐标轴分量列"
        "方程。",
        "惯性参考系，宏观物体，速度远小于光速",
        "选研究对象 → 受力分析 → 建坐标系 → 分量列方程 → 求解",
        "求出加速度、力或质量",
        "气垫导轨加速度测量与理论值比较",
        "非惯性参考系（需引入惯性力）|接近光速的高速运动|微观粒子的量子效应",
        "measurement",
    ),
    "能量守恒定律": (
        "能量既不会凭空产生也不会凭空消失，只会从一种形式转化为另一种形式，或从一个物体转移到另一个物体，"
        "总量保持不变。机械能守恒是它在只有重力或弹力做功时的特例。",
        "孤立系统，或已计入所有外界做功与热交换",
        "确定系统 → 列出各种能量 → 写初末状态能量方程",
        "求出速度、高度或损失的能量",
        "单摆与斜面实验的能量核算",
        "系统边界未封闭且遗漏了外力做功",
        "measurement",
    ),
    "欧姆定律": (
        "欧姆定律：导体中的电流与两端电压成正比，与电阻成反比，I = U/R。"
        "它对金属导体和电解液在温度不变时成立。",
        "线性电阻元件，温度基本不变",
        "确定电路 → 标出电压与电流 → 代入 I = U/R",
        "求出电流、电压或电阻",
        "伏安法测电阻实验",
        "半导体二极管等非线性元件|气体导电",
        "measurement",
    ),
    "多普勒效应": (
        "波源与观察者相对运动时，观察者接收到的频率与波源发出的频率不同：相互靠近时频率升高，"
        "远离时降低。救护车鸣笛音调变化、测速雷达和天文学红移都是它的应用。",
        "波源与观察者沿连线有相对速度，速度远小于波速",
        "确定相对运动方向 → 选公式 → 代入波速与速度",
        "求出接收频率或相对速度",
        "移动声源的频率测量",
        "相对速度接近光速（需相对论多普勒公式）",
        "measurement",
    ),
    "导数": (
        "导数是函数增量与自变量增量之比在增量趋于零时的极限，几何意义是曲线切线的斜率，"
        "物理意义是瞬时变化率。可导必连续，连续不一定可导（如 |x| 在 0 点）。",
        "函数在该点的某邻域内有定义且极限存在",
        "写出差商 → 取极限 → 用求导法则化简",
        "得到导函数或某点的导数值",
        "按定义逐步推导复核",
        "函数在该点不连续|左右导数不相等的尖点",
        "formal_proof",
    ),
    "泰勒公式": (
        "泰勒公式用函数在一点的各阶导数构造多项式来逼近函数，余项给出误差，"
        "如 e^x = 1 + x + x²/2! + … 。常用于求极限、近似计算和误差估计。",
        "函数在展开点附近 n+1 阶可导",
        "求各阶导数 → 写出多项式 → 估计余项",
        "得到近似多项式与误差界",
        "按定义逐步推导复核",
        "函数在展开点不可导|远离展开点时余项不收敛",
        "formal_proof",
    ),
    "化学平衡": (
        "可逆反应在一定条件下正反应速率等于逆反应速率时，各组分浓度不再变化，达到化学平衡。"
        "平衡是动态的，平衡常数 K 只随温度变化。",
        "封闭体系中的可逆反应，温度一定",
        "写平衡常数表达式 → 列三段式 → 求浓度或转化率",
        "求出平衡浓度、转化率或 K",
        "实验测定平衡浓度与计算值比较",
        "不可逆反应|开放体系中物质持续流入流出",
        "measurement",
    ),
    "勒夏特列原理": (
        "勒夏特列原理：改变影响平衡的一个条件（浓度、压强、温度），平衡就向能够减弱这种改变的方向移动。"
        "催化剂只加快达到平衡的速度，不改变平衡位置。",
        "已达平衡的可逆反应，只改变一个条件",
        "判断改变的条件 → 判断移动方向 → 推断浓度变化",
        "给出平衡移动方向",
        "NO2/N2O4 颜色随温度变化的演示实验",
        "同时改变多个条件|体系尚未达到平衡",
        "measurement",
    ),
    "光合作用": (
        "光合作用是绿色植物利用光能，把二氧化碳和水合成有机物并释放氧气的过程："
        "6CO2 + 6H2O → C6H12O6 + 6O2。光反应在类囊体薄膜上产生 ATP 和 NADPH，"
        "暗反应（卡尔文循环）在叶绿体基质中固定 CO2。",
        "含叶绿体的细胞，有光照、CO2 和水",
        "光反应 → 水的光解 → ATP 与 NADPH 生成 → 卡尔文循环固定 CO2",
        "产出葡萄糖等有机物与氧气",
        "同位素 18O 标记实验与叶片淀粉碘液检测",
        "无光照的暗期|缺乏叶绿体的细胞如根尖细胞",
        "data",
    ),
    "细胞呼吸": (
        "细胞呼吸把葡萄糖等有机物氧化分解并释放能量，有氧呼吸分糖酵解、三羧酸循环和电子传递链三个阶段，"
        "一分子葡萄糖约产生 30–32 个 ATP；无氧呼吸产生乳酸或酒精。",
        "活细胞，有可氧化的有机底物",
        "糖酵解 → 丙酮酸进入线粒体 → 三羧酸循环 → 氧化磷酸化",
        "产出 ATP、CO2 和水",
        "酵母菌呼吸方式探究实验",
        "缺氧条件下的有氧呼吸计算",
        "data",
    ),
    "DNA复制": (
        "DNA 复制是半保留复制：双链解开后各自作模板，DNA 聚合酶按碱基互补配对原则合成新链，"
        "方向总是 5'→3'，因此一条链连续合成（前导链），另一条分段合成冈崎片段（后随链）。",
        "细胞分裂间期，有模板、原料、酶和能量",
        "解旋 → 引物合成 → 延伸 → 冈崎片段连接",
        "得到两个与亲代相同的 DNA 分子",
        "梅塞尔森-斯塔尔 15N 密度梯度实验",
        "RNA 病毒的遗传物质复制",
        "data",
    ),
    "孟德尔遗传定律": (
        "孟德尔用豌豆杂交实验总结出分离定律和自由组合定律：F1 自交后代性状分离比为 3:1，"
        "两对相对性状的 F2 分离比为 9:3:3:1。",
        "真核生物有性生殖，核基因，完全显性",
        "确定亲本基因型 → 写配子 → 棋盘法组合 → 统计比例",
        "得到后代基因型和表现型比例",
        "测交实验比例与理论值比较",
        "细胞质遗传|两对基因位于同一对染色体上发生连锁",
        "data",
    ),
    "自然选择": (
        "自然选择：个体间存在可遗传的变异，环境中更适应的个体留下更多后代，"
        "有利变异在种群中逐代积累。达尔文在《物种起源》（1859）中系统提出。",
        "种群存在可遗传变异与生存竞争",
        "变异 → 选择压力 → 差异繁殖 → 基因频率改变",
        "解释适应性特征的形成",
        "桦尺蛾工业黑化的种群数据",
        "获得性状的直接遗传|个体在一生之内的变化",
        "data",
    ),
    "供求定律": (
        "在其他条件不变时，价格上升使需求量减少、供给量增加；需求曲线与供给曲线的交点决定均衡价格和均衡数量。",
        "竞争性市场，其他条件不变",
        "画需求曲线 → 画供给曲线 → 找交点 → 分析曲线移动",
        "得出均衡价格与数量的变化方向",
        "与统计年鉴的价格和产量数据比较",
        "价格管制下的市场|吉芬商品",
        "data",
    ),
    "机会成本": (
        "机会成本是为得到某种东西而放弃的其他选择中价值最高的那一个。"
        "例如读研的机会成本包括放弃的工资收入，而不只是学费。",
        "资源有限且存在多个互斥选择",
        "列出可选方案 → 估计各方案收益 → 取次优方案的收益",
        "给出某选择的真实代价",
        "课堂案例核对",
        "资源不稀缺的情形",
        "other",
    ),
    "经典条件反射": (
        "巴甫洛夫发现，把中性刺激（铃声）与无条件刺激（食物）多次配对后，中性刺激单独出现也能引起唾液分泌，"
        "成为条件刺激。条件反射可以消退，也会自然恢复。",
        "存在可靠的无条件刺激与反应",
        "配对呈现 → 习得 → 单独呈现条件刺激 → 观察消退",
        "建立或消退条件反应",
        "巴甫洛夫狗唾液分泌实验数据",
        "复杂的自主选择行为（属操作性条件反射）",
        "data",
    ),
    "艾宾浩斯遗忘曲线": (
        "艾宾浩斯用无意义音节做记忆实验，发现遗忘先快后慢：学习后 20 分钟约遗忘 42%，一天后约遗忘"
        " 66%。"
        "间隔重复能显著减缓遗忘。",
        "机械记忆材料，无复习",
        "学习 → 间隔测试保持量 → 画保持曲线",
        "给出复习间隔建议",
        "艾宾浩斯 1885 年自我实验数据",
        "有意义材料或已理解的知识",
        "data",
    ),
    "贝叶斯定理": (
        "贝叶斯定理：P(A|B) = P(B|A)·P(A) / P(B)，用新证据更新先验概率得到后验概率。"
        "经典例子：患病率 1% 的疾病，检测灵敏度 99%、假阳性率 5% 时，阳性者真正患病的概率只有约 "
        "17%。",
        "已知先验概率和似然",
        "写出先验 → 计算似然 → 全概率求分母 → 得后验",
        "得到后验概率",
        "按定义逐步推导复核",
        "先验概率未知且无法合理估计",
        "formal_proof",
    ),
    "中心极限定理": (
        "独立同分布、方差有限的随机变量，其样本均值在样本量足够大时近似服从正态分布，"
        "均值为总体均值，方差为 σ²/n。经验上 n ≥ 30 常被视为足够大。",
        "独立同分布，总体方差有限",
        "确定总体均值和方差 → 标准化样本均值 → 查正态分布表",
        "给出样本均值的近似分布与概率",
        "蒙特卡洛模拟对照",
        "总体方差无穷大如柯西分布|样本之间强相关",
        "formal_proof",
    ),
    "梯度下降": (
        "梯度下降沿损失函数负梯度方向迭代更新参数：θ ← θ - η∇L(θ)。学习率 η 过大会发散，过小收敛慢"
        "；"
        "随机梯度下降每步只用一个小批量样本。",
        "损失函数可微",
        "初始化参数 → 计算梯度 → 更新参数 → 检查收敛",
        "得到使损失较小的参数",
        "在验证集上监控损失曲线",
        "损失函数不可微且无次梯度|学习率设置过大",
        "measurement",
    ),
    "过拟合": (
        "过拟合指模型在训练集上表现很好、在新数据上表现差，因为它记住了训练数据的噪声。"
        "对策包括增加数据、正则化、早停、交叉验证和降低模型复杂度。",
        "模型容量相对数据量过大",
        "划分训练集与验证集 → 比较误差 → 调整复杂度或正则",
        "判断并缓解过拟合",
        "训练误差与验证误差曲线对比",
        "训练集与测试集分布本身不同（属分布漂移）",
        "measurement",
    ),
    "TCP三次握手": (
        "TCP 建立连接要三次握手：客户端发 SYN，服务器回 SYN+ACK，客户端再回 ACK。"
        "第三次握手防止已失效的连接请求突然到达服务器而建立错误连接。",
        "基于 TCP 的面向连接通信",
        "SYN → SYN+ACK → ACK → 连接建立",
        "双方确认初始序列号并进入 ESTABLISHED 状态",
        "Wireshark 抓包核对报文序列",
        "UDP 等无连接协议",
        "measurement",
    ),
    "死锁": (
        "死锁是一组进程互相等待对方占有的资源而都无法推进。四个必要条件：互斥、占有并等待、"
        "不可抢占、循环等待，破坏任意一个即可预防死锁。",
        "多个进程竞争不可抢占的资源",
        "画资源分配图 → 检测环路 → 选择预防、避免或解除策略",
        "判断是否死锁并给出解除方案",
        "银行家算法模拟与压力测试",
        "资源可被抢占",
        "test",
    ),
    "板块构造": (
        "岩石圈被分成若干板块，漂浮在软流层上缓慢移动，每年几厘米。"
        "板块交界处多火山和地震：张裂边界形成洋中脊和裂谷，碰撞边界形成海沟和山脉。",
        "地质时间尺度上的岩石圈运动",
        "确定板块边界类型 → 判断运动方向 → 推断地貌",
        "解释火山、地震和山脉的分布",
        "GPS 板块运动观测与海底磁条带数据",
        "短时间尺度的天气现象",
        "data",
    ),
    "工业革命": (
        "工业革命 18 世纪 60 年代始于英国，以瓦特改良蒸汽机（1769 年专利）为标志，"
        "工厂制度取代手工工场，带来城市化和生产力的飞跃。",
        "18 世纪中叶以后的西欧经济史",
        "背景 → 技术突破 → 生产组织变化 → 社会影响",
        "解释近代工业社会的形成",
        "与史料和统计数据对照",
        "工业化前的农业社会分析",
        "data",
    ),
    "勾股定理": (
        "直角三角形两直角边的平方和等于斜边的平方：a² + b² = c²。中国古代称勾股定理（勾三股四弦五"
        "），"
        "西方称毕达哥拉斯定理。",
        "平面欧氏几何中的直角三角形",
        "确认直角 → 标出直角边和斜边 → 代入公式",
        "求出未知边长",
        "按定义逐步推导复核",
        "非直角三角形（用余弦定理）|球面等非欧几何",
        "formal_proof",
    ),
    "秦统一六国": (
        "公元前 230 年至前 221 年，秦王嬴政先后灭韩、赵、魏、楚、燕、齐，建立中国第一个统一的中央"
        "集权王朝，"
        "随后统一文字、度量衡和货币，推行郡县制。",
        "战国末期政治史",
        "背景 → 兼并过程 → 统一措施 → 历史影响",
        "解释中央集权制度的起点",
        "与《史记·秦始皇本纪》记载对照",
        "先秦分封制时期的制度分析",
        "data",
    ),
    "高血压分级": (
        "成人在未服降压药时，非同日三次测量诊室血压，收缩压 ≥140 mmHg 和/或舒张压 ≥90 mmHg "
        "即诊断为高血压；"
        "按血压水平分为 1 级、2 级、3 级。",
        "成人，非同日多次规范测量",
        "规范测量 → 取平均 → 对照分级标准 → 评估危险因素",
        "给出高血压分级与危险分层",
        "与指南标准核对",
        "儿童和青少年|单次测量或白大衣高血压",
        "other",
    ),
    "binary search": (
        "Binary search finds a target in a sorted array by comparing it with the middle element "
        "and discarding the half that cannot contain it, so it needs at most about log2(n)+1 "
        "comparisons: O(log n). Compute the midpoint as lo + (hi - lo) // 2 to avoid overflow.",
        "the array is sorted and supports O(1) random access",
        "pick the middle, compare, shrink the interval, stop when it is empty",
        "return the index of the target or the insertion point",
        "unit tests covering empty arrays, duplicates and both ends",
        "the array is unsorted|the data is a linked list",
        "test",
    ),
    "quicksort": (
        "Quicksort picks a pivot, partitions the array into elements smaller and larger than the "
        "pivot, and sorts both parts recursively. Average O(n log n), worst case O(n^2) when the "
        "pivot is always an extreme value; it sorts in place but is not stable.",
        "an in-memory random-access sequence where stability does not matter",
        "choose a pivot, partition, recurse left, recurse right",
        "leave the sequence sorted in place",
        "randomised tests against the standard library sort",
        "a stable sort is required|nearly sorted input with a fixed first-element pivot",
        "test",
    ),
    "hash table": (
        "A hash table maps keys to buckets with a hash function and gives average O(1) insert, "
        "lookup and delete. Collisions are handled by chaining or open addressing; the table "
        "grows and rehashes when the load factor passes a threshold such as 0.75.",
        "keys are hashable and equality agrees with the hash",
        "hash the key, find the bucket, resolve collisions, resize when needed",
        "return the value for a key or report that it is absent",
        "unit tests for insert, delete and resize",
        "ordered iteration by key is required|keys are mutated after insertion",
        "test",
    ),
    "Dijkstra's algorithm": (
        "Dijkstra's algorithm computes single-source shortest paths by repeatedly taking the "
        "unsettled vertex with the smallest tentative distance and relaxing its edges. With a "
        "binary heap it runs in O((V + E) log V).",
        "a directed or undirected graph with non-negative edge weights",
        "initialise distances, pop the heap, relax edges, repeat",
        "return shortest distances and predecessors",
        "cross-checked against Bellman-Ford on random graphs",
        "the graph has negative edge weights",
        "test",
    ),
    "TCP three-way handshake": (
        "TCP opens a connection with three segments: the client sends SYN, the server answers "
        "SYN-ACK and the client replies ACK. Both sides agree on initial sequence numbers, and "
        "stale duplicate connection requests cannot open a connection.",
        "connection-oriented communication over TCP",
        "SYN, SYN-ACK, ACK",
        "both ends reach the ESTABLISHED state",
        "packet captures of the exchange",
        "connectionless protocols such as UDP",
        "measurement",
    ),
    "Newton's second law": (
        "Newton's second law states that the net force on a body equals its mass times its "
        "acceleration, F = ma; the acceleration points along the net force. One newton is one "
        "kilogram metre per second squared.",
        "an inertial frame, macroscopic bodies, speeds far below the speed of light",
        "choose the body, draw the free-body diagram, resolve components, solve",
        "find the acceleration, force or mass",
        "air-track measurements compared with predictions",
        "non-inertial frames without fictitious forces|speeds close to the speed of light",
        "measurement",
    ),
    "Doppler effect": (
        "When a wave source and an observer move relative to each other, the observed frequency "
        "differs from the emitted one: higher while they approach, lower while they recede. "
        "Police radar, medical ultrasound and astronomical redshift all rely on it.",
        "relative motion along the line of sight, speeds well below the wave speed",
        "find the direction of motion, choose the formula, substitute speeds",
        "find the observed frequency or the relative speed",
        "frequency measurements of a moving source",
        "relative speeds close to the speed of light",
        "measurement",
    ),
    "Ohm's law": (
        "Ohm's law: the current through a conductor is proportional to the voltage across it, "
        "I = V/R, for ohmic materials at constant temperature.",
        "linear resistive elements at constant temperature",
        "identify the circuit, mark voltages and currents, apply I = V/R",
        "find a current, voltage or resistance",
        "voltmeter-ammeter measurements",
        "non-linear elements such as diodes|gas discharges",
        "measurement",
    ),
    "photoelectric effect": (
        "Light above a threshold frequency ejects electrons from a metal surface; the electrons' "
        "maximum kinetic energy is hf minus the work function and does not depend on intensity. "
        "Einstein's 1905 explanation introduced light quanta.",
        "monochromatic light on a clean metal surface",
        "compare frequency with threshold, compute hf - W, relate to stopping voltage",
        "predict whether and how fast electrons are emitted",
        "Millikan's stopping-voltage measurements",
        "light below the threshold frequency however intense",
        "measurement",
    ),
    "photosynthesis": (
        "Photosynthesis turns light energy, water and carbon dioxide into glucose and oxygen: "
        "6CO2 + 6H2O -> C6H12O6 + 6O2. The light-dependent reactions in the thylakoid membranes "
        "make ATP and NADPH; the Calvin cycle in the stroma fixes CO2.",
        "cells with chloroplasts, light, water and carbon dioxide",
        "light reactions, photolysis of water, ATP and NADPH, Calvin cycle",
        "produce sugars and release oxygen",
        "isotope labelling with 18O and the starch-iodine leaf test",
        "darkness|cells without chloroplasts such as root cells",
        "data",
    ),
    "cellular respiration": (
        "Cellular respiration oxidises glucose to release energy: glycolysis in the cytoplasm, "
        "then the Krebs cycle and oxidative phosphorylation in the mitochondria, yielding about "
        "30-32 ATP per glucose. Without oxygen, cells fall back on fermentation.",
        "living cells with an oxidisable substrate",
        "glycolysis, pyruvate oxidation, Krebs cycle, electron transport chain",
        "produce ATP, carbon dioxide and water",
        "yeast respiration experiments",
        "aerobic yield calculations under anoxic conditions",
        "data",
    ),
    "DNA replication": (
        "DNA replication is semi-conservative: the strands separate and each templates a new "
        "strand. DNA polymerase only extends 5' to 3', so the leading strand is continuous and "
        "the lagging strand is built from Okazaki fragments.",
        "dividing cells with template, nucleotides, enzymes and energy",
        "unwinding, priming, elongation, ligation of Okazaki fragments",
        "produce two DNA molecules identical to the parent",
        "the Meselson-Stahl 15N density experiment",
        "RNA virus genomes",
        "data",
    ),
    "natural selection": (
        "Natural selection: heritable variation plus differential reproduction means traits that "
        "help survival and reproduction become more common over generations. Darwin set it out "
        "in On the Origin of Species, 1859.",
        "a population with heritable variation and competition",
        "variation, selection pressure, differential reproduction, changed allele frequencies",
        "explain how adaptations arise",
        "peppered moth population records",
        "inheritance of acquired characteristics|changes within one lifetime",
        "data",
    ),
    "the Krebs cycle": (
        "The Krebs (citric acid) cycle oxidises acetyl-CoA in the mitochondrial matrix, producing "
        "CO2, NADH, FADH2 and GTP each turn; the reduced carriers feed the electron transport "
        "chain.",
        "aerobic eukaryotic cells",
        "acetyl-CoA joins oxaloacetate, stepwise oxidation, regeneration of oxaloacetate",
        "produce reduced electron carriers",
        "isotope tracing studies",
        "anaerobic fermentation",
        "data",
    ),
    "supply and demand": (
        "Other things equal, a higher price lowers the quantity demanded and raises the quantity "
        "supplied; the intersection of the two curves sets the equilibrium price and quantity.",
        "a competitive market, other things equal",
        "draw demand, draw supply, find the intersection, shift curves",
        "predict the direction of price and quantity changes",
        "market price and volume statistics",
        "price-controlled markets|Giffen goods",
        "data",
    ),
    "opportunity cost": (
        "The opportunity cost of a choice is the value of the best alternative given up: the "
        "cost of graduate school includes the salary you do not earn, not just tuition.",
        "scarce resources and mutually exclusive options",
        "list the options, value each, take the best forgone one",
        "state the true cost of a decision",
        "classroom case studies",
        "resources that are not scarce",
        "other",
    ),
    "Pythagorean theorem": (
        "In a right triangle the square of the hypotenuse equals the sum of the squares of the "
        "other two sides: a^2 + b^2 = c^2, as in the 3-4-5 triangle.",
        "right triangles in Euclidean plane geometry",
        "check the right angle, label legs and hypotenuse, substitute",
        "find an unknown side",
        "step-by-step proof from the axioms",
        "triangles without a right angle|spherical geometry",
        "formal_proof",
    ),
    "Bayes' theorem": (
        "Bayes' theorem, P(A|B) = P(B|A) P(A) / P(B), updates a prior with evidence. With a 1% "
        "prevalence, 99% sensitivity and a 5% false-positive rate, a positive test means only "
        "about a 17% chance of disease.",
        "a known prior and likelihood",
        "state the prior, compute the likelihood, normalise, read the posterior",
        "give the posterior probability",
        "derivation from the definition of conditional probability",
        "no defensible prior can be stated",
        "formal_proof",
    ),
    "the central limit theorem": (
        "The mean of many independent, identically distributed variables with finite variance is "
        "approximately normal, with the population mean and variance sigma^2/n; n >= 30 is a "
        "common rule of thumb.",
        "independent, identically distributed samples with finite variance",
        "find mean and variance, standardise the sample mean, use the normal table",
        "approximate probabilities for the sample mean",
        "Monte Carlo simulation",
        "heavy-tailed distributions without finite variance such as the Cauchy|strongly dependent samples",
        "formal_proof",
    ),
    "plate tectonics": (
        "The lithosphere is split into plates moving a few centimetres a year over the "
        "asthenosphere. Divergent boundaries form mid-ocean ridges, convergent ones trenches and "
        "mountain ranges, and most earthquakes and volcanoes sit on boundaries.",
        "lithosphere motion over geological time",
        "classify the boundary, find the motion, infer the landforms",
        "explain where earthquakes, volcanoes and mountains occur",
        "GPS plate-motion data and seafloor magnetic stripes",
        "short-term weather phenomena",
        "data",
    ),
    "confirmation bias": (
        "Confirmation bias is the tendency to seek, interpret and remember information in a way "
        "that confirms what one already believes, as in Wason's 2-4-6 task.",
        "judgements under uncertainty with a prior belief",
        "state the belief, look for disconfirming evidence, compare",
        "flag a conclusion that may be biased",
        "Wason selection and 2-4-6 task results",
        "purely mechanical calculations with no prior belief",
        "data",
    ),
}

#: Aspects of a concept, one note each: (Chinese, English). The first is the
#: concept's overview note, whose instance name is the bare concept.
ASPECTS: tuple[tuple[str, str], ...] = (
    ("概述", "overview"),
    ("定义", "definition"),
    ("核心原理", "key idea"),
    ("推导过程", "derivation"),
    ("典型例题", "worked example"),
    ("常见误区", "common mistakes"),
    ("实际应用", "applications"),
    ("发展历史", "history"),
    ("与相近概念的区别", "comparison"),
    ("适用边界", "limits of validity"),
    ("实验与验证", "evidence"),
    ("关键数值", "key numbers"),
    ("记忆要点", "mnemonic"),
    ("练习题", "exercises"),
    ("延伸阅读", "further reading"),
    ("反例", "counterexamples"),
)

# One sentence per aspect ({c} concept, {d} domain, {r} a related concept).
_ASPECT_TEXT_ZH: tuple[str, ...] = (
    "{c}是{d}里的基础内容，和{r}经常放在一起学习。",
    "{c}的定义要逐字读：先看研究对象，再看限定条件，最后看结论成立的范围。",
    "{c}的核心在于抓住不变的量：把问题化归到已知的结论上，再检查前提是否满足。",
    "推导{c}时从定义出发，每一步都写明依据；卡住时回到{r}的结论找中间步骤。",
    "例题：给出一个满足前提的具体情形，按步骤套用{c}，再换一个边界数据检验答案是否合理。",
    "常见误区：把{c}的结论当成无条件成立，或者把它和{r}混为一谈。",
    "{c}在{d}之外也常被用到：工程估算、数据分析和日常决策里都能看到它的影子。",
    "{c}的提出经历了从经验观察到严格表述的过程，教材里的表述是后人整理的版本。",
    "{c}与{r}的区别：两者研究的对象相近，但前提不同，得出的结论也不能互换。",
    "{c}只在前提成立时可靠；超出适用范围时要换用更一般的理论或方法。",
    "验证{c}的办法是设计一个能够否定它的情形，看结论是否仍然成立。",
    "与{c}有关的关键数值和单位要单独记，考试和实际计算中最容易在这里出错。",
    "记忆要点：一句话概括{c}，再配一个最典型的例子和一个反例。",
    "练习：先做三道直接套用{c}的题，再做一道需要和{r}结合的综合题。",
    "延伸阅读：教材相关章节之后，再看一篇介绍{c}来龙去脉的综述。",
    "反例：找一个看起来符合{c}、实际上前提不成立的情形，说明结论为什么失效。",
)
_ASPECT_TEXT_EN: tuple[str, ...] = (
    "{c} is a core topic in {d}, usually studied together with {r}.",
    "Read the definition of {c} word by word: the object, the conditions, then the scope.",
    "The key idea of {c} is to reduce a problem to a known result and check its assumptions.",
    "Derive {c} from the definitions, citing a reason for every step; {r} supplies the missing lemmas.",
    "Worked example: take a concrete case that meets the assumptions, apply {c} step by step, "
    "then test the answer on an edge case.",
    "Common mistakes: treating {c} as true without its assumptions, or confusing it with {r}.",
    "{c} shows up well beyond {d}: in engineering estimates, data analysis and everyday decisions.",
    "{c} grew from observation to a precise statement; the textbook form is a later tidy-up.",
    "{c} versus {r}: similar objects, different assumptions, conclusions that do not transfer.",
    "{c} is reliable only inside its assumptions; outside them use a more general theory.",
    "To test {c}, design a case that could refute it and check whether the result still holds.",
    "Keep the key numbers and units of {c} on a separate card: that is where errors creep in.",
    "Mnemonic: one sentence for {c}, one typical example and one counterexample.",
    "Exercises: three direct applications of {c}, then one problem that combines it with {r}.",
    "Further reading: the textbook chapter first, then a review of how {c} developed.",
    "Counterexamples: a case that looks like {c} but violates an assumption, and why it fails.",
)
_APPLIES_ZH = (
    "{d}课程语境下讨论{c}的标准情形",
    "题设满足{c}的前提假设",
    "复习{d}时遇到与{c}相关的问题",
    "需要向初学者解释{c}",
)
_APPLIES_EN = (
    "the standard setting of {c} in a {d} course",
    "the problem meets the assumptions of {c}",
    "reviewing {d} and a question involves {c}",
    "explaining {c} to a beginner",
)
_STEPS_ZH = (
    "回顾{c}的定义 → 核对前提 → 套用结论 → 检查边界情形",
    "列出已知条件 → 选择与{c}相关的方法 → 计算或推理 → 复核",
    "先举例 → 再抽象 → 与{r}对比 → 总结",
)
_STEPS_EN = (
    "recall the definition of {c}, check the assumptions, apply the result, check edge cases",
    "list what is known, pick a method based on {c}, compute, double-check",
    "start from an example, abstract, compare with {r}, summarise",
)
_EXECUTES_ZH = ("给出{c}的{a}要点", "输出关于{c}的简明解释和一个例子", "返回结论及其适用前提")
_EXECUTES_EN = (
    "state the {a} of {c}",
    "give a short explanation of {c} with one example",
    "return the conclusion with its assumptions",
)
_VERIFIED_ZH = {
    "test": "对照教材习题答案逐题核对",
    "measurement": "与实验测量数据对照",
    "formal_proof": "按定义逐步推导复核",
    "data": "与公开数据和文献记载对照",
    "compiler": "示例代码编译运行通过",
    "other": "与同行讨论确认",
}
_VERIFIED_EN = {
    "test": "checked against the textbook's answers",
    "measurement": "compared with measured data",
    "formal_proof": "re-derived step by step from the definitions",
    "data": "checked against published data and sources",
    "compiler": "the example code compiles and runs",
    "other": "confirmed in discussion with a colleague",
}
_NOT_APPLICABLE_ZH = (
    "前提假设不成立",
    "超出课程范围的特殊情形",
    "样本量过小",
    "把{c}直接类比到其他学科",
    "资料来源未经核实",
    "与{r}混淆时",
)
_NOT_APPLICABLE_EN = (
    "the assumptions do not hold",
    "special cases beyond the course",
    "the sample is too small",
    "carrying {c} over to another field by analogy",
    "the source has not been checked",
    "when {c} is confused with {r}",
)
#: Verification bases and their weights (absent on a share of nodes besides).
_BASES = (
    ("test", 30),
    ("data", 25),
    ("measurement", 15),
    ("formal_proof", 15),
    ("other", 10),
    ("compiler", 5),
)

#: Knowledge nodes in the full sample and in the slice.
FULL_KNOWLEDGE = 3048
SLICE_KNOWLEDGE = 200
DEFAULT_SEED = 2026
#: The slice's domains: the demo's concepts live here.
SLICE_DOMAINS: tuple[str, ...] = (
    "计算机科学",
    "物理学",
    "高等数学",
    "化学",
    "生物学",
    "Computer Science",
    "中国历史",
    "经济学",
    "心理学",
    "Physics",
    "Biology",
    "概率论与数理统计",
    "机器学习",
    "地理学",
    "Economics",
)
#: Nodes of the other layers: full sample, slice.
OTHER_LAYERS: dict[str, tuple[int, int]] = {
    "anchor": (24, 3),
    "structural": (30, 4),
    "contextual": (42, 5),
    "self": (28, 4),
    "rejected": (26, 5),
    "unresolved": (30, 5),
}
#: ``condition_space`` values on knowledge nodes with their shares (exact quotas).
TOOLS: tuple[tuple[str, float], ...] = (
    ("文本", 0.93),
    ("图像识别", 0.025),
    ("代码执行", 0.02),
    ("实验测量", 0.012),
    ("文献检索", 0.008),
    ("对话记录", 0.005),
)
CONSTRAINTS: tuple[tuple[str, float], ...] = (
    ("无", 0.95),
    ("协议实例运行中", 0.02),
    ("需要联网", 0.015),
    ("仅限实验环境", 0.01),
    ("以2019版教材为准", 0.005),
)
TIME_WINDOWS: tuple[tuple[tuple[int, int], float], ...] = (
    ((1756684800, 1788220800), 0.72),
    ((1788220800, 1819756800), 0.20),
    ((1725148800, 1756684800), 0.08),
)
# Zipf exponent and offset of the domain sizes: with 90 domains and 3,042
# nodes the largest holds 5.4% and Σvᵢ²/n² is 2.0%, as in the seed's census.
_ZIPF_S = 1.05
_ZIPF_OFFSET = 6
# Share of knowledge nodes with each property (drawn per node).
_P_SKELETON = 0.01
_P_DOMAIN_TAG = 0.05
_P_CCG_DICT = 0.08
_P_CCG_INCOMPLETE = 0.12
_P_NO_BASIS = 0.12
_P_NA_FIELD = 0.75
_P_RULE_LINE = 0.05
_P_WHITESPACE = 0.03
_POSITION_STYLES_ZH = (
    ("{d}·知识点（{i}）", 60),
    ("{d}·知识点({i})", 12),
    ("{d}·要点（{i}）", 8),
    ("{d} - 条目（{i}）", 8),
    ("{d}（{i}）", 6),
    ("{d}/示例（{i}）", 6),
)
_POSITION_STYLES_EN = (
    ("{d} · topic ({i})", 60),
    ("{d} · topic（{i}）", 12),
    ("{d} / example ({i})", 10),
    ("{d} - entry ({i})", 10),
    ("{d} ({i})", 8),
)
_SKELETONS_ZH = ("{d}·内容（按骨架填充）", "{d}·模板（待填充）")
_SKELETONS_EN = ("{d} · content (skeleton fill)", "{d} · template (to be filled)")


@dataclass(frozen=True)
class SampleStats:
    """What :func:`generate` wrote, measured on the nodes it generated."""

    path: str
    sha256: str
    seed: int
    slice: bool
    nodes: int
    layers: dict[str, int]
    edges: int
    dangling_edges: int
    edge_types: dict[str, int]
    knowledge: int
    domains: int
    orphans: int
    distinct_positions: int
    largest_domain_share: float
    top_tool_share: float
    top_constraint_share: float
    time_windows: int
    domain_tagged: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


@dataclass
class _Item:
    """One knowledge note to generate."""

    domain: str | None
    lang: str
    concept: str
    aspect: int
    part: int
    related: str


def _apportion(weights: list[float], total: int, minimum: int = 0) -> list[int]:
    """Split ``total`` in proportion to ``weights`` (largest remainder), each >= ``minimum``."""
    rest = total - minimum * len(weights)
    if rest < 0:
        raise ValueError(f"cannot give {len(weights)} parts at least {minimum} of {total}")
    scale = sum(weights)
    exact = [w * rest / scale for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (counts[i] - exact[i], i))
    for i in order[: rest - sum(counts)]:
        counts[i] += 1
    return [c + minimum for c in counts]


def _quota(rng: random.Random, n: int, table: tuple[tuple[Any, float], ...]) -> list[Any]:
    """``n`` values in the exact shares of ``table``, shuffled."""
    counts = _apportion([w for _, w in table], n)
    pool = [value for (value, _), k in zip(table, counts, strict=True) for _ in range(k)]
    rng.shuffle(pool)
    return pool


def _weighted(rng: random.Random, table: tuple[tuple[Any, float], ...]) -> Any:
    return rng.choices([v for v, _ in table], weights=[w for _, w in table])[0]


def _node_id(prefix: str, seed: int, key: str, taken: set[str]) -> str:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()
    width = 8
    while f"{prefix}_{digest[:width]}" in taken:
        width += 2
    node_id = f"{prefix}_{digest[:width]}"
    taken.add(node_id)
    return node_id


# -- knowledge ------------------------------------------------------------------


def _domains(language: str | None) -> list[tuple[str, str, str]]:
    """:data:`DOMAINS`, or those of one language (``"en"`` or ``"zh"``)."""
    if language is None:
        return list(DOMAINS)
    if language not in ("en", "zh"):
        raise ValueError(f"language must be 'en', 'zh' or None, got {language!r}")
    return [d for d in DOMAINS if d[1] == language]


def _plan_domains(
    knowledge: int, slice_: bool, language: str | None = None
) -> tuple[list[tuple[str, str, list[str], int]], int]:
    """``[(domain, language, concepts, size)]`` and the number of orphans."""
    orphans = max(2, round(knowledge / 500))
    if knowledge < orphans + 2:
        raise ValueError(f"knowledge must be at least {orphans + 2}, got {knowledge}")
    table = [(d, lang, concepts.split("|")) for d, lang, concepts in _domains(language)]
    if slice_:
        chosen = [t for t in table if t[0] in SLICE_DOMAINS]
    else:
        chosen = table[: max(1, min(len(table), (knowledge - orphans) // 12))]
    count = min(len(chosen), (knowledge - orphans) // 2)
    chosen = chosen[:count]
    weights = [(i + _ZIPF_OFFSET) ** -_ZIPF_S for i in range(1, count + 1)]
    sizes = _apportion(weights, knowledge - orphans, minimum=2)
    return [(d, lang, c, s) for (d, lang, c), s in zip(chosen, sizes, strict=True)], orphans


def _items(rng: random.Random, knowledge: int, slice_: bool, language: str | None) -> list[_Item]:
    plan, orphans = _plan_domains(knowledge, slice_, language)
    domains = _domains(language)
    items: list[_Item] = []
    for domain, lang, concepts, size in plan:
        pairs = [(c, a) for a in range(len(ASPECTS)) for c in concepts]
        for k in range(size):
            concept, aspect = pairs[k % len(pairs)]
            related = concepts[(concepts.index(concept) + 1 + k % 3) % len(concepts)]
            items.append(_Item(domain, lang, concept, aspect, k // len(pairs), related))
    for k in range(orphans):
        _, lang, joined = domains[k % len(domains)]
        names = joined.split("|")
        items.append(_Item(None, lang, names[k % len(names)], 0, 0, names[-1]))
    rng.shuffle(items)
    return items


def _instance(item: _Item) -> str:
    zh = item.lang == "zh"
    if item.aspect == 0:
        name = item.concept
    else:
        aspect = ASPECTS[item.aspect][0 if zh else 1]
        name = f"{item.concept}·{aspect}" if zh else f"{item.concept}: {aspect}"
    if item.part:
        name += f"·第{item.part + 1}篇" if zh else f", part {item.part + 1}"
    return name


def _position(rng: random.Random, item: _Item) -> str:
    zh = item.lang == "zh"
    if rng.random() < _P_SKELETON:
        return rng.choice(_SKELETONS_ZH if zh else _SKELETONS_EN).format(d=item.domain)
    style = _weighted(rng, _POSITION_STYLES_ZH if zh else _POSITION_STYLES_EN)
    return style.format(d=item.domain, i=_instance(item))


def _fill(template: str, item: _Item, domain: str) -> str:
    aspect = ASPECTS[item.aspect][0 if item.lang == "zh" else 1]
    return template.format(c=item.concept, d=domain, r=item.related, a=aspect)


def _elements(rng: random.Random, item: _Item, basis: str | None) -> tuple[dict[str, str], list[str]]:
    """CCG elements (by element name) and the not-applicable conditions of a note."""
    zh = item.lang == "zh"
    domain = item.domain or ("通用" if zh else "general studies")
    curated = CURATED.get(item.concept)
    if curated:
        _, applies, steps, executes, verified, na, _ = curated
        conditions = na.split("|")
    else:
        applies = _fill(rng.choice(_APPLIES_ZH if zh else _APPLIES_EN), item, domain)
        steps = _fill(rng.choice(_STEPS_ZH if zh else _STEPS_EN), item, domain)
        executes = _fill(rng.choice(_EXECUTES_ZH if zh else _EXECUTES_EN), item, domain)
        verified = (_VERIFIED_ZH if zh else _VERIFIED_EN).get(basis or "", "")
        pool = _NOT_APPLICABLE_ZH if zh else _NOT_APPLICABLE_EN
        conditions = [_fill(t, item, domain) for t in rng.sample(pool, rng.choice((1, 1, 2)))]
    if basis is None:
        verified = "待验证：尚无外部依据" if zh else "not yet verified against an outside source"
    elements = {
        "function": _instance(item),
        "applies_when": applies,
        "steps": steps,
        "executes": executes,
        "verified_by": verified,
        "not_applicable": ("；" if zh else "; ").join(conditions),
    }
    return elements, conditions


def _prose(rng: random.Random, item: _Item) -> str:
    zh = item.lang == "zh"
    domain = item.domain or ("通用" if zh else "general studies")
    texts = _ASPECT_TEXT_ZH if zh else _ASPECT_TEXT_EN
    sentence = _fill(texts[item.aspect], item, domain)
    curated = CURATED.get(item.concept)
    parts = []
    if curated and (item.aspect == 0 or rng.random() < 0.6):
        parts.append(curated[0])
    parts.append(sentence)
    if item.domain is None:
        parts.insert(0, "未归类的笔记。" if zh else "An unfiled note.")
    return ("" if zh else " ").join(parts)


def _mark_lines(rng: random.Random, elements: dict[str, str], lang: str, drop: set[str]) -> str:
    zh = lang == "zh" and rng.random() >= 0.03  # a few Chinese notes use English marks
    colon = ":" if not zh or rng.random() < 0.05 else "："
    hashes = "##" if rng.random() < 0.05 else "#"
    lines = []
    for key, (zh_mark, en_mark, _) in ELEMENTS.items():
        if key in drop:
            continue
        mark = zh_mark if zh else en_mark
        sep = colon if zh else ": "
        lines.append(f"{hashes} {mark}{sep}{elements[key]}".rstrip())
    return "\n".join(lines)


def _knowledge_node(rng: random.Random, item: _Item, node_id: str, space: dict[str, Any]) -> Node:
    zh = item.lang == "zh"
    curated = CURATED.get(item.concept)
    basis: str | None
    if rng.random() < _P_NO_BASIS:
        basis = None
    elif curated:
        basis = curated[6]
    else:
        basis = _weighted(rng, _BASES)
    elements, conditions = _elements(rng, item, basis)
    prose = _prose(rng, item)
    state: dict[str, Any] = {}
    roll = rng.random()
    if roll < _P_CCG_DICT:
        by_mark = rng.random() < 0.5
        state["ccg"] = {
            (ELEMENTS[k][0] if by_mark and zh else k): v for k, v in elements.items() if k != "function"
        }
        body = f"# {ELEMENTS['function'][0] if zh else ELEMENTS['function'][1]}"
        body += f"{'：' if zh else ': '}{elements['function']}\n\n{prose}\n"
    else:
        drop: set[str] = set()
        if roll < _P_CCG_DICT + _P_CCG_INCOMPLETE:
            required = [k for k in ELEMENTS if ELEMENTS[k][2]]
            drop = set(rng.sample(required, rng.choice((1, 1, 2))))
        body = f"{_mark_lines(rng, elements, item.lang, drop)}\n\n{prose}\n"
    if rng.random() < _P_RULE_LINE:
        body += (
            f"\n---\n\n参考：{item.domain or '通用'}教材相关章节；另见{item.related}。\n"
            if zh
            else f"\n---\n\nSee also: {item.related}.\n"
        )
    if rng.random() < _P_WHITESPACE:
        body = rng.choice(("\n", "  ", "\n\n")) + body + rng.choice(("\n", "  \n", "\t\n"))
    if rng.random() < 0.3:
        state["modality"] = "text"
    tags = ["知识点" if zh else "note", ASPECTS[item.aspect][0 if zh else 1], item.lang]
    if item.domain and rng.random() < _P_DOMAIN_TAG:
        tag = item.domain if rng.random() < 0.8 else item.domain.upper()
        tags.insert(0, f"domain:{tag}")
    window = space["time_window"]
    created = round(rng.uniform(window[0], window[1]), 3)
    if rng.random() < 0.05:
        created = window[0] + rng.random() * (window[1] - window[0])
    accesses = 0 if rng.random() < 0.6 else rng.randint(1, 40)
    node = Node(
        id=node_id,
        layer="knowledge",
        body=body,
        modality=rng.choices(("text", "code", "image", None), weights=(88, 5, 3, 4))[0],
        importance=round(rng.uniform(0.3, 0.95), 2),
        confidence=round(rng.uniform(0.4, 0.95), 2) if rng.random() < 0.95 else rng.random(),
        condition_space=space,
        tags=tags,
        temporal="durable" if rng.random() < 0.2 else None,
        created_at=created,
        state_attributes=state or None,
        verification_basis=basis,
        non_applicable_conditions=conditions if rng.random() < _P_NA_FIELD else [],
        access_count=accesses,
        last_access=0 if not accesses else round(created + rng.uniform(3600, 9e6), 3),
    )
    if node.modality == "image":
        node.spatial = {"bbox": [rng.randint(0, 400), rng.randint(0, 300), 640, 480]}
    if rng.random() < 0.1:
        node.semantic_coordinates = [round(rng.uniform(-1, 1), 4) for _ in range(3)]
    if rng.random() < 0.05:
        node.entity_id = "ent_" + hashlib.sha256(item.concept.encode()).hexdigest()[:6]
    if rng.random() < 0.1:
        node.updated_at = round(created + rng.uniform(60, 86400 * 30), 3)
    if rng.random() < 0.02:
        node.extra = {"origin": rng.choice(("lecture-notes-2025", "textbook-import", "manual"))}
    return node


def _knowledge(
    rng: random.Random, seed: int, knowledge: int, slice_: bool, taken: set[str], language: str | None
) -> tuple[list[_Item], list[Node]]:
    """The knowledge notes to write and their nodes, in the same order."""
    items = _items(rng, knowledge, slice_, language)
    tools = _quota(rng, len(items), TOOLS)
    constraints = _quota(rng, len(items), CONSTRAINTS)
    windows = _quota(rng, len(items), TIME_WINDOWS)
    nodes: list[Node] = []
    for k, item in enumerate(items):
        space: dict[str, Any] = {}
        if item.domain is not None:
            space["observation_position"] = _position(rng, item)
        space["observation_tool"] = tools[k]
        space["time_window"] = list(windows[k])
        space["existence_constraint"] = constraints[k]
        node_id = _node_id("kp", seed, f"knowledge:{k}", taken)
        nodes.append(_knowledge_node(rng, item, node_id, space))
    return items, nodes


def _edge(rng: random.Random, target: str, kind: str) -> Edge:
    return Edge(
        target=target,
        type=kind,
        confidence=round(rng.uniform(0.5, 0.95), 2),
        verified=1 if rng.random() < 0.3 else 0,
    )


def _knowledge_edges(rng: random.Random, seed: int, items: list[_Item], nodes: list[Node]) -> None:
    """Out-edges between knowledge notes, a few dangling, every type at least once."""
    by_domain: dict[str | None, list[int]] = defaultdict(list)
    by_concept: dict[tuple[str | None, str], dict[int, int]] = defaultdict(dict)
    for k, item in enumerate(items):
        by_domain[item.domain].append(k)
        by_concept[(item.domain, item.concept)].setdefault(item.aspect, k)
    for k, item in enumerate(items):
        node = nodes[k]
        peers = by_domain[item.domain]
        family = by_concept[(item.domain, item.concept)]
        targets: list[tuple[int, str]] = []
        if item.aspect and 0 in family and rng.random() < 0.55:
            targets.append((family[0], "part_of"))
        if item.aspect + 1 in family and rng.random() < 0.12:
            targets.append((family[item.aspect + 1], "sequential"))
        if rng.random() < 0.18:
            targets.append((rng.choice(peers), "similar"))
        if rng.random() < 0.05:
            targets.append((rng.choice(peers), "causal"))
        if item.aspect == 0 and rng.random() < 0.25:
            targets.append((peers[0], "hierarchical"))
        if rng.random() < 0.02:
            targets.append((rng.randrange(len(items)), "spatial"))
        seen = set()
        for target, kind in targets:
            if target != k and target not in seen:
                seen.add(target)
                node.edges.append(_edge(rng, nodes[target].id, kind))
    present = {e.type for n in nodes for e in n.edges}
    for kind in EDGE_TYPES:
        if kind not in present and kind != "supersedes":  # lifecycle edges are not seeded
            a, b = rng.sample(range(len(nodes)), 2)
            nodes[a].edges.append(_edge(rng, nodes[b].id, kind))
    dangling = max(2, round(len(nodes) * 0.003))
    for j, k in enumerate(sorted(rng.sample(range(len(nodes)), dangling))):
        gone = "kp_gone_" + hashlib.sha256(f"{seed}:gone:{j}".encode()).hexdigest()[:6]
        nodes[k].edges.append(_edge(rng, gone, rng.choice(("similar", "causal", "part_of"))))


# -- the other layers -------------------------------------------------------------

#: Bodies of the other layers by layer and language ({c} concept, {r} related
#: concept, {d} domain, {na} a not-applicable condition, {v} how it was verified).
_OTHER_TEXT: dict[str, dict[str, tuple[str, ...]]] = {
    "anchor": {
        "zh": (
            "用户长期关注{d}，回答时优先给出{d}教材级的表述，并注明适用前提。",
            "用户的母语是中文；技术术语保留英文原文，例如{c}。",
            "anchor/ 中的记忆不可遗忘：修改前必须得到用户的明确确认。",
            "用户不接受没有来源的数字：引用{d}的数据时必须给出出处。",
        ),
        "en": (
            "The user prefers answers that start with the conclusion and then show the "
            "derivation, especially for {c}.",
            "The user teaches {d} and needs worked examples that can be used in class as they are.",
        ),
    },
    "structural": {
        "zh": (
            "# 功能名：检索协议\n# 生效条件：收到关于{d}的知识问答请求\n"
            "# 子功能：路由到领域桶 → 桶内检索 → 全库回退\n# 执行：返回带资格判定的结果\n"
            "# 验证方式：回归测试\n# 不适用条件：用户明确要求不检索记忆",
            "写入协议：新知识先进 contextual/，被引用三次以上再升入 knowledge/ 的{d}桶。",
            "冲突处理：两条关于{c}的记忆结论相反时，保留验证基底更强的一条，另一条移入 rejected/。",
        ),
        "en": (
            "Trust protocol: notes on {d} verified by measurement or proof start at confidence "
            "0.7; second-hand sources start at 0.5.",
            "# Function: answer protocol\n# Applies when: a question about {d}\n"
            "# Steps: recall, judge, answer, record gaps\n# Executes: an answer with its basis\n"
            "# Verified by: weekly review of answers\n# Not applicable when: small talk",
        ),
    },
    "contextual": {
        "zh": (
            "会话记录：用户正在复习{c}，卡在适用条件的判断上。",
            "本周计划：整理{d}错题本，重点是{c}和{r}。",
            "用户提到下周有{d}考试，需要把{c}的常见误区过一遍。",
        ),
        "en": (
            "Session note: the user asked for a worked example of {c} and a comparison with {r}.",
            "Reminder: follow up on the question about {c} from yesterday's session.",
        ),
    },
    "self": {
        "zh": (
            "盲区：对{d}中{c}的边界情形掌握不牢，回答前需要先检索。",
            "已掌握：{c}的标准表述和典型例题，回答可信度较高。",
            "信任状态：关于{d}的数字类记忆有两次被纠正，引用前复核。",
        ),
        "en": (
            "Self model: I tend to over-generalise {c}; check its assumptions before answering.",
            "Known gap: I confuse {c} with {r} under time pressure.",
        ),
    },
    "rejected": {
        "zh": (
            "# 假设：{c}在任何条件下都成立\n# 否决原因：{na}时结论不成立\n# 验证：{v}",
            "# 假设：{c}与{r}可以互换使用\n# 否决原因：两者前提不同\n# 验证：{v}",
        ),
        "en": (
            "# Hypothesis: {c} needs no assumptions\n# Rejected because: it fails when {na}\n"
            "# Verification: {v}",
            "# Hypothesis: {c} and {r} are interchangeable\n"
            "# Rejected because: their assumptions differ\n# Verification: {v}",
        ),
    },
    "unresolved": {
        "zh": (
            "# 问题：{na}时{c}应该如何修正？\n# 已知线索：教材只讨论了标准情形；{r}可能给出提示\n"
            "# 目标：找到修正后的表述并验证",
            "# 问题：{c}和{r}在{d}里的边界在哪里？\n# 已知线索：两者经常在同一题中出现\n"
            "# 目标：写出区分二者的判据",
        ),
        "en": (
            "# Question: how should {c} be revised for this case: {na}?\n# Clues: the textbook "
            "only covers the "
            "standard case; {r} may help\n# Goal: a corrected statement with evidence",
        ),
    },
}
_OTHER_PREFIX = {
    "anchor": "anc",
    "structural": "st",
    "contextual": "ctx",
    "self": "self",
    "rejected": "rej",
    "unresolved": "unr",
}
_IMPORTANCE = {
    "anchor": (0.9, 1.0),
    "structural": (0.7, 0.9),
    "contextual": (0.2, 0.5),
    "self": (0.5, 0.8),
    "rejected": (0.0, 0.0),
    "unresolved": (0.3, 0.6),
}


def _other_nodes(
    rng: random.Random,
    seed: int,
    slice_: bool,
    knowledge: list[Node],
    items: list[_Item],
    taken: set[str],
) -> list[Node]:
    nodes: list[Node] = []
    start, end = TIME_WINDOWS[0][0]
    filed = [k for k, item in enumerate(items) if item.domain is not None]
    for layer, (full, small) in OTHER_LAYERS.items():
        templates = _OTHER_TEXT[layer]
        for j in range(small if slice_ else full):
            k = rng.choice(filed)
            item = items[k]
            english = item.lang == "en"
            pool = templates["en" if english else "zh"]
            template = pool[j % len(pool)]
            fallback = "the assumptions do not hold" if english else "前提不成立"
            conditions = knowledge[k].non_applicable_conditions or [fallback]
            basis = knowledge[k].verification_basis or "other"
            verified = (_VERIFIED_EN if english else _VERIFIED_ZH)[basis]
            body = template.format(
                c=item.concept, r=item.related, d=item.domain, na=conditions[0], v=verified
            )
            low, high = _IMPORTANCE[layer]
            node = Node(
                id=_node_id(_OTHER_PREFIX[layer], seed, f"{layer}:{j}", taken),
                layer=layer,
                body=body + "\n",
                modality="text",
                importance=round(rng.uniform(low, high), 2),
                confidence=round(rng.uniform(0.1, 0.3) if layer == "rejected" else rng.uniform(0.5, 0.95), 2),
                tags=[layer, "en" if english else "zh"],
                created_at=round(rng.uniform(start, end), 3),
                access_count=rng.randint(0, 12),
                last_access=0,
            )
            if layer in ("rejected", "structural", "self"):
                node.verification_basis = basis if layer == "rejected" else "other"
            if layer == "contextual":
                node.temporal = rng.choice(("one_off", "one_off", "recurring", "unknown"))
                node.condition_space = {
                    "observation_position": "对话记录·会话（上下文）",
                    "observation_tool": "对话记录",
                    "time_window": list(TIME_WINDOWS[0][0]),
                    "existence_constraint": "无",
                }
            elif layer in ("anchor", "self"):
                node.temporal = "durable"
            if layer in ("self", "unresolved", "rejected", "contextual") and rng.random() < 0.5:
                kind = {
                    "self": "similar",
                    "unresolved": "causal",
                    "rejected": "similar",
                    "contextual": "sequential",
                }[layer]
                node.edges.append(_edge(rng, knowledge[k].id, kind))
            nodes.append(node)
    return nodes


# -- generation -------------------------------------------------------------------


def build_nodes(
    *,
    knowledge: int | None = None,
    seed: int = DEFAULT_SEED,
    slice_: bool = False,
    language: str | None = None,
) -> list[Node]:
    """The sample's nodes, in the order they are written (by ``created_at``, then id).

    ``language`` (``"en"`` or ``"zh"``) draws the knowledge notes from the
    domains of that language only (an all-English store for benchmarks); the
    default mixes both, as the sample does.
    """
    count = knowledge if knowledge is not None else (SLICE_KNOWLEDGE if slice_ else FULL_KNOWLEDGE)
    rng = random.Random(seed)
    taken: set[str] = set()
    items, nodes = _knowledge(rng, seed, count, slice_, taken, language)
    _knowledge_edges(rng, seed, items, nodes)
    nodes.extend(_other_nodes(rng, seed, slice_, nodes, items, taken))
    nodes.sort(key=lambda n: (n.created_at or 0.0, n.id))
    return nodes


def _share(counter: Counter[Any], total: int) -> float:
    return counter.most_common(1)[0][1] / total if total else 0.0


def measure(
    nodes: list[Node], path: str = "", sha256: str = "", seed: int = 0, slice_: bool = False
) -> SampleStats:
    """Shape figures of a list of nodes (the ones :func:`build_nodes` returns)."""
    ids = {n.id for n in nodes}
    knowledge = [n for n in nodes if n.layer == "knowledge"]
    spaces = [n.condition_space or {} for n in knowledge]
    keys = Counter(route_key(n) for n in knowledge)
    orphans = keys.pop(None, 0)
    edges = [e for n in nodes for e in n.edges]
    return SampleStats(
        path=path,
        sha256=sha256,
        seed=seed,
        slice=slice_,
        nodes=len(nodes),
        layers=dict(Counter(n.layer for n in nodes)),
        edges=len(edges),
        dangling_edges=sum(1 for e in edges if e.target not in ids),
        edge_types=dict(sorted(Counter(e.type for e in edges).items())),
        knowledge=len(knowledge),
        domains=len(keys),
        orphans=orphans,
        distinct_positions=len({s["observation_position"] for s in spaces if "observation_position" in s}),
        largest_domain_share=max(keys.values()) / len(knowledge) if keys else 0.0,
        top_tool_share=_share(Counter(s.get("observation_tool") for s in spaces), len(knowledge)),
        top_constraint_share=_share(Counter(s.get("existence_constraint") for s in spaces), len(knowledge)),
        time_windows=len({json.dumps(s.get("time_window")) for s in spaces}),
        domain_tagged=sum(1 for n in knowledge if domain_from_tags(n.tags)),
    )


def generate(
    path: str | Path,
    *,
    knowledge: int | None = None,
    seed: int = DEFAULT_SEED,
    slice_: bool = False,
) -> SampleStats:
    """Write the sample database to ``path`` (replacing it) and return its figures.

    ``knowledge`` defaults to :data:`FULL_KNOWLEDGE` (3,048), or
    :data:`SLICE_KNOWLEDGE` (200) when ``slice_`` is true. The file is written
    next to ``path`` under a temporary name and moved into place, so a reader
    never sees half a database. Same arguments, same bytes.
    """
    target = Path(path)
    nodes = build_nodes(knowledge=knowledge, seed=seed, slice_=slice_)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        tmp.unlink()
        conn = sqlite3.connect(tmp)
        try:
            conn.execute("PRAGMA page_size = 4096")
            write_nodes(conn, nodes)
        finally:
            conn.close()
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    return measure(nodes, str(target), digest, seed, slice_)


def bundled_sample_path() -> Path:
    """Path of the shipped slice, ``md_cg/data/sample.sqlite``."""
    path = Path(str(resources.files("md_cg").joinpath("data", "sample.sqlite")))
    if not path.is_file():
        raise MdcgError(f"{path}: the bundled sample database is missing from this install")
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m md_cg.sample OUT.sqlite [--slice] [--knowledge N] [--seed S]``."""
    parser = argparse.ArgumentParser(
        prog="python -m md_cg.sample",
        description="Write the deterministic seed-shaped sample sqlite database.",
    )
    parser.add_argument("out", help="the .sqlite file to write (replaced if it exists)")
    parser.add_argument("--slice", action="store_true", help="write the small demo slice")
    parser.add_argument("--knowledge", type=int, default=None, help="knowledge nodes to generate")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed")
    args = parser.parse_args(argv)
    try:
        stats = generate(args.out, knowledge=args.knowledge, seed=args.seed, slice_=args.slice)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(stats.to_dict(), ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
