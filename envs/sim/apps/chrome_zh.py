"""Simplified Chinese UI strings of the Chrome app (``ChromeApp.zh``, see :mod:`darwin.envs.sim.i18n`)."""

from __future__ import annotations

ZH: dict[str, str] = {
    "Chrome": "Chrome", "Search or type web address": "搜索或输入网址", "Google Search": "Google 搜索", "{} - Google Search": "{} - Google 搜索",
    "Images for {}": "{} 的图片", "Videos: {}": "视频：{}", "{} - News": "{} - 新闻", "{} - Official site": "{} - 官方网站", "{} - Wikipedia": "{} - 维基百科",
    "Tabs": "标签页", "1 open tab": "1 个打开的标签页", "{} open tabs": "{} 个打开的标签页", "Manage your open tabs.": "管理打开的标签页。",
    "New tab": "新标签页", "New Incognito tab": "新的无痕式标签页", "Incognito is disabled": "无痕模式已停用", "Bookmarks": "书签",
    "History": "历史记录", "Your history appears here": "您的历史记录将显示在这里", "Clear browsing data": "清除浏览数据",
    "Browsing data cleared": "浏览数据已清除", "Chrome menu": "Chrome 菜单", "Close": "关闭", "Close all": "全部关闭",
    "Close all tabs": "关闭所有标签页", "Close all tabs?": "要关闭所有标签页吗？", "This closes {} tabs.": "这会关闭 {} 个标签页。",
    "Settings": "设置", "Make Chrome your own": "打造您的专属 Chrome", "Sign in to sync your bookmarks, passwords and more.": "登录即可同步您的书签、密码等。",
    "No thanks": "不用了", "Maps": "地图", "Gmail": "Gmail", "YouTube": "YouTube", "Wikipedia": "维基百科", "Google": "Google",
}
