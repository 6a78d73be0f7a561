"""Simplified Chinese UI strings of the Contacts app (``ContactsApp.zh``, see :mod:`darwin.envs.sim.i18n`)."""

from __future__ import annotations

ZH: dict[str, str] = {
    "Contacts": "通讯录", "Search contacts": "搜索联系人", "Search": "搜索", "Favorites": "收藏", "Create contact": "新建联系人",
    "Edit contact": "修改联系人", "First name": "名字", "Last name": "姓氏", "Phone": "电话", "Email": "电子邮件", "Mobile": "手机",
    "Save": "保存", "Cancel": "取消", "Delete": "删除", "Discard": "舍弃", "Keep editing": "继续修改", "Delete contact?": "要删除联系人吗？",
    "{} will be removed from your contacts.": "系统会将{}从您的通讯录中移除。", "Discard changes?": "要舍弃更改吗？",
    "Your changes to this contact will be lost.": "您对此联系人所做的更改将会丢失。", "Contact deleted": "已删除联系人",
    "Contact saved": "已保存联系人", "Add a name or a phone number": "请添加姓名或电话号码", "In Favorites": "已收藏",
    "Not in Favorites": "未收藏", "No phone number": "没有电话号码", "No contacts match '{}'": "没有与“{}”匹配的联系人",
    "1 favorite": "1 位收藏的联系人", "{} favorites": "{} 位收藏的联系人", "1 contact": "1 位联系人", "{} contacts": "{} 位联系人",
}
