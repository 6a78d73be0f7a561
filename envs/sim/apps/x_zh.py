"""Simplified Chinese UI strings of the X app (``XApp.zh``, see :mod:`darwin.envs.sim.i18n`)."""

from __future__ import annotations

ZH: dict[str, str] = {
    "X": "X",
    "Home": "首页",
    "Search": "搜索",
    "Search X": "搜索 X",
    "Drafts": "草稿",
    "New post": "新帖子",
    "Save": "保存",
    "Discard": "放弃",
    "Save post?": "要保存帖子吗？",
    "Saved to drafts": "已保存到草稿",
    "What's happening?": "有什么新鲜事？",
    "You can save this to send later from your drafts.": "您可以保存此帖子，稍后从草稿中发送。",
    "You don't have any drafts": "您没有任何草稿",
    "Your post was sent": "您的帖子已发送",
    "No results for '{}'": "没有“{}”的结果",
    "Follow": "关注",
    "Following": "正在关注",
    "Post": "发帖",
    "Profile": "个人资料",
    "People": "用户",
}
