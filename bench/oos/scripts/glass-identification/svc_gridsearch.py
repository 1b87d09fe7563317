# idiom: GridSearchCV over an RBF SVC pipeline with StandardScaler, StratifiedKFold; intended: valid
import pandas as pd
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
features = ["RI", "Na", "Mg", "Al", "Si", "K", "Ca", "Ba", "Fe"]

pipe = Pipeline([("scale", StandardScaler()), ("svc", SVC(kernel="rbf"))])
grid = {"svc__C": [1, 3, 10, 30, 100], "svc__gamma": ["scale", 0.03, 0.1, 0.3]}
search = GridSearchCV(pipe, grid, cv=StratifiedKFold(n_splits=4, shuffle=True, random_state=0), scoring="accuracy")
search.fit(train[features], train["type"])
print("best params:", search.best_params_)
print("best CV accuracy: %.3f" % search.best_score_)

pd.DataFrame({"id": test["id"], "type": search.predict(test[features])}).to_csv("submission.csv", index=False)
