#ifndef ST_VERSION_H
#define ST_VERSION_H
#define ST_VERSION "0.1.0"
#endif
