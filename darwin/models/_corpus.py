"""The built-in text the tiny tokenizer's BPE merges are learned from.

Only efficiency depends on it: the tokenizer is byte-level, so any text (any script,
emoji, control characters) encodes and decodes exactly whatever this corpus holds. It
covers what a mobile agent reads and writes: UI-TARS / Qwen2.5-VL style prompts and
``Thought: ...\\nAction: ...`` outputs, the darwin action space, common phone UI words,
app names and a few Chinese UI words. Generation is deterministic (a local
``random.Random`` with a fixed seed; no global RNG is touched).
"""

from __future__ import annotations

import random

_UI_WORDS = """
search settings notification notifications history dark theme display alarm alarms clock time zone
timezone tab tabs new close open app apps home back button menu more options icon list item items
cart add remove filter sort results result price rating reviews hotel hotels flight flights stay
stays date dates guest guests room rooms adult adults child children check in out book booking
confirm cancel save saved delete edit done ok yes no allow deny continue next previous skip sign
login logout account profile email password username phone message messages send reply call contact
contacts camera photo photos gallery video videos music play pause stop volume brightness wifi
bluetooth airplane mode battery storage language keyboard input text field box bar toggle switch
enable disable on off select selected choose option options page screen scroll swipe tap press long
hold drag drop type enter clear copy paste share download upload file files folder browser chrome
google amazon booking clock calendar event events reminder note notes weather map maps location
navigate navigation route destination address street city country currency temperature celsius
fahrenheit units metric imperial size small medium large smaller larger font system general about
privacy security update version help support feedback report news article articles section
technology business sports world latest top trending popular recommended wishlist favourites
favorites bookmark bookmarks recent today tomorrow yesterday week month year morning evening night
monday tuesday wednesday thursday friday saturday sunday january february march april may june july
august september october november december hour hours minute minutes second seconds am pm repeat
label snooze vibrate ringtone sound sounds stopwatch timer bedtime world london paris berlin tokyo
new york shanghai beijing sydney the a an to of for and or with from on in at by is it this that
my your all any one two three first last then now task goal instruction screenshot current step
steps action actions thought thoughts reflection summary I should need will can see want find go
tap click clicked typing typed scrolling opened opening visible shown showing appears appear
successfully complete completed finished answer question incognito window windows private mode
sunglasses headphones wireless charger laptop shoes shirt book books kids children kitchen
"""

_APPS = [
    "Amazon",
    "Booking.com",
    "Chrome",
    "Clock",
    "Settings",
    "Calendar",
    "Contacts",
    "Gmail",
    "Google Maps",
    "YouTube",
    "Messages",
    "Phone",
    "Camera",
    "Photos",
    "Files",
    "Calculator",
    "Airbnb",
    "BBC News",
    "Bolt",
    "Spotify",
    "WhatsApp",
    "Telegram",
    "X",
    "Reddit",
]

_CJK_WORDS = [
    "搜索",
    "设置",
    "打开",
    "返回",
    "主页",
    "通知",
    "历史",
    "深色",
    "主题",
    "闹钟",
    "时区",
    "标签",
    "购物车",
    "添加",
    "删除",
    "确认",
    "取消",
    "保存",
    "你好",
    "应用",
    "点击",
    "输入",
    "完成",
]

_CJK_COMMON = (
    "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其"
    "里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公"
    "从知使点新开名最关全机表第入请选择返回页首设置通知历史主题闹钟时区标签购物车添加删除确认取消保存应用"
    "输入完成搜索打开显示浏览器搜狗微信支付宝淘宝京东美团地图音乐视频相册相机电话短信联系人日历天气文件夹"
    "下载上传分享复制粘贴编辑更多菜单按钮列表商品价格评分评论酒店机票航班日期房间成人儿童登录注册账号密码"
    "手机号验证码发送消息语言键盘字体大小亮度声音音量蓝牙网络飞行模式电池存储隐私安全更新版本帮助反馈"
)

_DIRECTIONS = ["up", "down", "left", "right"]

SYSTEM_PROMPT = (
    "You are a GUI agent. You are given a task and your action history, with screenshots. "
    "You need to perform the next action to complete the task.\n\n"
    "## Output Format\n```\nThought: ...\nAction: ...\n```\n\n"
    "## Action Space\n"
    "click(start_box='<|box_start|>(x1,y1)<|box_end|>')\n"
    "long_press(start_box='<|box_start|>(x1,y1)<|box_end|>')\n"
    "type(content='') #If you want to submit your input, use \"\\n\" at the end of `content`.\n"
    "scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')\n"
    "drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')\n"
    "open_app(app_name='')\npress_home()\npress_back()\nwait()\n"
    "finished(content='xxx') # Use escape characters \\', \\\", and \\n in content part.\n"
    "answer(content='')\n\n"
    "## Note\n- Use English in `Thought` part.\n"
    "- Write a small plan and finally summarize your next action (with its target element) "
    "in one sentence in `Thought` part.\n\n"
    "## User Instruction\n"
)


def _coord(rng: random.Random) -> str:
    return f"({rng.randrange(1000)},{rng.randrange(1000)})"


def _box(rng: random.Random) -> str:
    return f"'<|box_start|>{_coord(rng)}<|box_end|>'"


def _phrase(rng: random.Random, words: list[str], n: int) -> str:
    return " ".join(rng.choice(words) for _ in range(n))


def _action(rng: random.Random, words: list[str]) -> str:
    kind = rng.randrange(14)
    if kind == 0:
        return f"click(start_box={_box(rng)})"
    if kind == 1:
        return f"long_press(start_box={_box(rng)})"
    if kind == 2:
        return f"type(content='{_phrase(rng, words, rng.randint(1, 3))}')"
    if kind == 3:
        return f"scroll(start_box={_box(rng)}, direction='{rng.choice(_DIRECTIONS)}')"
    if kind == 4:
        return f"drag(start_box={_box(rng)}, end_box={_box(rng)})"
    if kind == 5:
        return f"open_app(app_name='{rng.choice(_APPS)}')"
    if kind == 6:
        return rng.choice(["press_home()", "press_back()", "wait()"])
    if kind == 7:
        return f"finished(content='{_phrase(rng, words, rng.randint(1, 4))}')"
    if kind == 8:
        return f"answer(content='{_phrase(rng, words, rng.randint(1, 3))}')"
    if kind == 9:
        return f"click(x={rng.randrange(1080)}, y={rng.randrange(2400)})"
    if kind == 10:
        return f"long_press(x={rng.randrange(1080)}, y={rng.randrange(2400)})"
    if kind == 11:
        return f"scroll(x={rng.randrange(1080)}, y={rng.randrange(2400)}, direction='{rng.choice(_DIRECTIONS)}')"
    if kind == 12:
        return f"type(content='{rng.choice(_CJK_WORDS)}')"
    return f'{{"type": "click", "x": {rng.randrange(1080)}, "y": {rng.randrange(2400)}}}'


def corpus(n_samples: int = 3000, seed: int = 0) -> list[str]:
    """Deterministic training text for the tiny BPE (same list for the same arguments)."""
    rng = random.Random(seed)
    words = _UI_WORDS.split()
    capitalised = [w.capitalize() for w in words]
    out = [SYSTEM_PROMPT, " ".join(words), " ".join(capitalised), " ".join(_APPS)]
    out += [" ".join(_CJK_WORDS)] * 4
    out += ["\n".join(_CJK_COMMON)] * 2
    for _ in range(n_samples):
        thought = _phrase(rng, words, rng.randint(4, 12)).capitalize() + "."
        goal = f"{rng.choice(['Open', 'Search', 'Go to', 'Turn on', 'Set'])} {_phrase(rng, words, rng.randint(2, 6))}"
        out.append(f"{goal} in {rng.choice(_APPS)}.")
        out.append(f"Thought: {thought}\nAction: {_action(rng, words)}")
        out.append(f"{rng.choice(capitalised)} {rng.choice(words)} {rng.choice(words)}")
    return out
