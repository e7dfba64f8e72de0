LISTEN {channel};
