"""Simplified Chinese UI strings of the Amazon app (``AmazonApp.zh``, see :mod:`darwin.envs.sim.i18n`)."""

from __future__ import annotations

ZH: dict[str, str] = {
    "Amazon": "亚马逊",
    "amazon": "亚马逊",
    "Search Amazon": "搜索亚马逊",
    "Add to Cart": "加入购物车",
    "Added to cart": "已加入购物车",
    "Buy Now": "立即购买",
    "Buy again": "再次购买",
    "Cart": "购物车",
    "Cart {}": "购物车 {}",
    "Deal {}% off": "优惠 {}% 折扣",
    "FREE delivery Tuesday": "周二免费配送",
    "In stock": "有现货",
    "Ships from Amazon": "由亚马逊发货",
    "Remove": "删除",
    'Results for "{}"': "“{}”的搜索结果",
    "Sign in to buy": "登录后购买",
    "Today's deals": "今日优惠",
    "You": "我",
    "Your Amazon Cart is empty": "您的亚马逊购物车是空的",
    "Your account": "我的账户",
    "Your account settings": "账户设置",
    "Your lists": "我的心愿单",
    "Your orders": "我的订单",
    "{} - {} stars": "{} - {} 星",
    "Home": "首页",
}
