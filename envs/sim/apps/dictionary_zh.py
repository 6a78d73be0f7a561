"""Simplified Chinese UI strings of the Merriam-Webster app (``DictionaryApp.zh``, see :mod:`darwin.envs.sim.i18n`)."""

from __future__ import annotations

ZH: dict[str, str] = {
    "Merriam-Webster": "韦氏词典",
    "Dictionary": "词典",
    "Thesaurus": "同义词词典",
    "Favorites": "收藏",
    "Search the dictionary": "搜索词典",
    "Save to favorites": "收藏",
    "Saved to favorites": "已收藏",
    "Remove": "移除",
    "Thesaurus needs a subscription": "同义词词典需要订阅",
    "Trending now": "当前热门",
    "Word of the Day: {}": "每日一词：{}",
    "Words you save appear here": "您收藏的单词会显示在这里",
    "Definition:": "释义：",
    "The word '{}' isn't in the dictionary.": "词典中没有“{}”这个词。",
    "Try another spelling.": "请尝试其他拼写。",
    "{} (adjective)": "{}（形容词）",
    "{} (noun)": "{}（名词）",
    "{} (verb)": "{}（动词）",
    "{} (adverb)": "{}（副词）",
}
