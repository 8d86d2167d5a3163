"""dynamic"""
