"""Simplified Chinese UI strings of the Mail app (``MailApp.zh``, see :mod:`darwin.envs.sim.i18n`)."""

from __future__ import annotations

ZH: dict[str, str] = {
    "Mail": "邮件", "Inbox": "收件箱", "Starred": "已加星标", "Sent": "已发送", "Drafts": "草稿",
    "Search in mail": "在邮件中搜索", "Search": "搜索", "Compose": "写邮件", "Labels": "标签",
    "To": "收件人", "Subject": "主题", "Compose email": "撰写邮件", "Send": "发送",
    "From: {}": "发件人：{}", "To: {}": "收件人：{}", "Labels: {}": "标签：{}", "No labels": "无标签",
    "Reply": "回复", "Forward": "转发", "Label": "标签", "Draft": "草稿", "(no subject)": "（无主题）",
    "Nothing in {}": "{}中没有邮件", "No mail matches '{}'": "没有与“{}”匹配的邮件",
    "Message sent": "邮件已发送", "Saved as draft": "已存为草稿", "Archived": "已归档", "Moved to Trash": "已移至垃圾箱",
    "Add a recipient": "请添加收件人", "This message was deleted": "此邮件已被删除", "Label as": "添加标签",
    "Nothing with this label": "此标签下没有邮件", "me": "我", "Archive": "归档", "Trash": "垃圾箱",
    "Enjoying Mail?": "喜欢邮件吗？", "Tell us what you think. It only takes a minute.": "告诉我们您的想法，只需一分钟。",
    "Not now": "以后再说", "Work": "工作", "Travel": "旅行", "Receipts": "收据", "Family": "家庭",
}
