"""Simplified Chinese UI strings of the Google Play app (``PlayApp.zh``, see :mod:`darwin.envs.sim.i18n`)."""

from __future__ import annotations

ZH: dict[str, str] = {
    "Google Play": "Google Play", "Search apps & games": "搜索应用和游戏", "Recommended for you": "为您推荐", "Install": "安装",
    "Free - Install": "免费 - 安装", "Open": "打开", "Uninstall": "卸载", "Results for \"{}\"": "“{}”的搜索结果", "Settings": "设置",
    "Account": "账号", "Library": "库", "Manage apps & device": "管理应用和设备", "Payments & subscriptions": "付款和订阅",
    "Play Protect": "Play 保护机制", "Help & feedback": "帮助和反馈", "General": "常规", "Family": "家庭", "About": "关于",
    "Account and device preferences": "账号和设备偏好设置", "Auto-update apps": "自动更新应用", "Download preferences": "下载偏好设置",
    "Family library": "家庭媒体库", "Notifications": "通知", "Parental controls": "家长控制", "Play Protect certification": "Play 保护机制认证",
    "Play Store version": "Play 商店版本", "Theme": "主题", "Dark": "深色", "Light": "浅色", "System default": "系统默认",
    "Tap to collapse": "点按即可收起", "Tap to expand": "点按即可展开", "{} stars - {} downloads": "{} 星 - {} 次下载",
    "Rated for {}": "适合 {} 岁",
}
