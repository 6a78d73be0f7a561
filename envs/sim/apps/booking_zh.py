"""Simplified Chinese UI strings of the Booking.com app (``BookingApp.zh``, see :mod:`darwin.envs.sim.i18n`)."""

from __future__ import annotations

ZH: dict[str, str] = {
    "Booking.com": "缤客", "Stays": "住宿", "Flights": "机票", "Car rental": "租车", "Bookings": "行程", "Saved": "收藏",
    "Profile": "我的", "Search": "搜索", "Apply": "应用", "Save": "收藏", "Destination": "目的地", "Enter destination": "输入目的地",
    "Enter your destination": "输入您的目的地", "Where are you going?": "您要去哪里？", "Select dates": "选择日期",
    "Select your dates": "请选择日期", "Select check-in and check-out dates": "请选择入住和退房日期",
    "Enter a destination to start searching": "请输入目的地开始搜索", "Check-in - Check-out": "入住 - 退房",
    "Check-in: {}    Check-out: {}": "入住：{}    退房：{}", "{} Nov": "11月{}日", "{} Dec": "12月{}日",
    "Rooms and guests": "客房和住客", "Rooms: {}": "客房：{}", "Adults: {}": "成人：{}", "Children: {}": "儿童：{}",
    "{} room - {} adults - {} children": "{0}间客房 - {1}位成人 - {2}名儿童", "{} rooms - {} adults - {} children": "{0}间客房 - {1}位成人 - {2}名儿童",
    "{} room - {} adult - {} children": "{0}间客房 - {1}位成人 - {2}名儿童", "{} room - {} adults - {} child": "{0}间客房 - {1}位成人 - {2}名儿童",
    "Car rental is not available": "租车服务暂不可用", "Flights are not available": "机票服务暂不可用",
    "No saved properties": "没有收藏的住宿", "No upcoming trips": "没有即将开始的行程", "Manage account": "管理账户",
    "Rewards & Wallet": "奖励和钱包", "Help center": "帮助中心", "Settings": "设置", "Currency": "货币", "Language": "语言",
    "Units": "单位", "Temperature": "温度", "Notifications": "通知", "Celsius": "摄氏度", "Fahrenheit": "华氏度", "Euro": "欧元",
    "Metric (km, m)": "公制（千米、米）", "Imperial (mi, ft)": "英制（英里、英尺）", "English (UK)": "英语（英国）", "City": "城市",
    "Free cancellation": "免费取消", "Breakfast included": "含早餐", "On": "开", "Off": "关",
}
