"""Simplified Chinese UI strings of the Messages app (``MessagesApp.zh``, see :mod:`darwin.envs.sim.i18n`)."""

from __future__ import annotations

ZH: dict[str, str] = {
    "Messages": "信息",
    "Search conversations": "搜索对话",
    "Search": "搜索",
    "New conversation": "发起对话",
    "Top contacts": "常用联系人",
    "Type a name or phone number": "输入姓名或电话号码",
    "Text message": "短信",
    "Send": "发送",
    "Mark all read": "全部标为已读",
    "All conversations marked as read": "所有对话均已标为已读",
    "Conversation options": "对话选项",
    "Delete": "删除",
    "Cancel": "取消",
    "Delete this conversation?": "要删除此对话吗？",
    "Your messages with {} will be deleted.": "您与{}的信息将被删除。",
    "Conversation deleted": "对话已删除",
    "No unread messages": "没有未读信息",
    "{} unread": "{} 条未读",
    "No results for '{}'": "没有“{}”的结果",
    "No single contact matches '{}'": "没有唯一与“{}”匹配的联系人",
    "Start your conversation with {}": "开始与{}对话",
    "You: {}": "我：{}",
    "You": "我",
}
