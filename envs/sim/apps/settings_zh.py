"""Simplified Chinese UI strings of the Settings app (``SettingsApp.zh``, see :mod:`darwin.envs.sim.i18n`)."""

from __future__ import annotations

ZH: dict[str, str] = {
    "Settings": "设置", "Network & internet": "网络和互联网", "Wi-Fi, mobile, data usage": "WLAN、移动网络、流量使用情况",
    "Connected devices": "已连接的设备", "Bluetooth, pairing": "蓝牙、配对", "Apps": "应用", "Recent apps, default apps": "最近使用的应用、默认应用",
    "Notifications": "通知", "Notification history, conversations": "通知历史记录、对话", "Battery": "电池", "Storage": "存储",
    "{}% used - {} GB free": "已使用 {}% - 可用空间 {} GB", "Sound & vibration": "声音和振动", "Volume, haptics, Do Not Disturb": "音量、触感、勿扰",
    "Display": "显示", "Dark theme, font size, brightness": "深色主题、字号、亮度", "Wallpaper & style": "壁纸和样式",
    "Colours, themed icons": "颜色、主题图标", "Accessibility": "无障碍", "Display, interaction, audio": "显示、互动、音频",
    "Security & privacy": "安全和隐私", "App security, device lock": "应用安全、设备锁定", "Appearance": "外观",
    "Dark theme": "深色主题", "Use dark background": "使用深色背景", "Brightness": "亮度", "Adaptive brightness": "自动调节亮度",
    "Screen timeout": "屏幕超时", "Font size and text": "字号和文字", "Default": "默认", "Themed icons": "主题图标",
    "Extra dim": "超暗", "Color inversion": "颜色反转", "App notifications": "应用通知",
    "Control notifications from individual apps": "控制各个应用的通知", "Notification history": "通知历史记录",
    "Show recent and snoozed notifications": "显示近期通知和已暂停的通知", "Use notification history": "使用通知历史记录",
    "Recent notifications appear here": "最近的通知会显示在这里",
    "Turn on notification history to see recent": "开启通知历史记录，即可查看近期通知", "and snoozed notifications": "和已暂停的通知",
    "Conversations": "对话", "No priority conversations": "没有优先对话", "Notification dot on app icon": "应用图标上的通知圆点",
    "Hide silent notifications in status bar": "在状态栏中隐藏无声通知", "Airplane mode": "飞行模式", "Mobile data": "移动数据",
    "Wi-Fi": "WLAN", "Bluetooth": "蓝牙", "NFC": "NFC", "Adaptive Battery": "自适应电池", "Battery Saver": "省电模式",
    "Storage manager": "存储空间管理器", "Show system apps": "显示系统应用", "Show passwords": "显示密码",
    "Touch sounds": "触摸提示音", "Vibrate for calls": "来电振动", "Amazon Shopping": "亚马逊购物", "Google Play Store": "Google Play 商店",
    "Booking.com": "缤客", "Chrome": "Chrome", "Clock": "时钟", "{} seconds": "{} 秒", "1 minute": "1 分钟", "{} minutes": "{} 分钟",
}
